// kagi-fsck: finds damaged append-only logs under data.dir and, with --repair, rewrites each
// to hold only its intact records (after a backup copy beside it).
//
//   kagi-fsck [--conf FILE] [--set section.key=value]... [--data DIR] [--repair [--offline]]
//
// Exit codes: 0 no damage; 1 damage found (without --repair, or some log not repaired);
// 3 damage found and every damaged log repaired; 2 bad command line, config or unreadable
// data.dir. Safe to run while the site serves (see fsck/fsck.hpp for the locks it takes).
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <kagi/app/lock_conf.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_domain.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/serve/command_line.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/lock_domain_claim.hpp>
#include "fsck/fsck.hpp"

namespace {

using kagi::apps::fsck::LogReport;

constexpr const char* kUsage =
    "usage: kagi-fsck [--conf FILE] [--set section.key=value]... [--data DIR] [--repair "
    "[--offline]]\n"
    "Scans every kagi log under data.dir (or DIR) and reports the damaged ones: path, offset\n"
    "and size of each damaged span, records kept. Readers already skip the damage; --repair\n"
    "copies each damaged log to <log>.bak-<UTC time> beside it and rewrites the log with its\n"
    "intact records, under the lock the apps use for it (the site may keep running). A log no\n"
    "app lock is known for is repaired only with --offline: stop the site first.\n"
    "Exit: 0 clean, 1 damage left, 3 damage repaired, 2 usage or config error.\n";

std::string utc_stamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

void print(const LogReport& r) {
  std::cout << (r.damaged() ? "DAMAGED " : "ok      ") << r.path << ": " << r.records
            << " records kept, " << r.bytes << " bytes";
  if (r.torn_tail) std::cout << ", torn tail of " << r.torn_tail << " bytes (harmless)";
  std::cout << "\n";
  for (const auto& d : r.damage) {
    std::cout << "  damaged span at offset " << d.offset << ", " << d.length
              << " bytes: at least one record lost (how many, the damage hides)\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  kagi::CommandLine args(argc, argv, "kagi-fsck", kUsage);
  std::optional<std::string> data_dir;
  bool do_repair = false, offline = false;
  while (args.next()) {
    if (args.take_conf_flags()) continue;
    if (args.is("--data")) {
      data_dir = args.value();
    } else if (args.is("--repair")) {
      do_repair = true;
    } else if (args.is("--offline")) {
      offline = true;
    } else {
      args.refuse();
    }
  }
  if (offline && !do_repair) args.usage_error("--offline only goes with --repair");
  // The site's conf file names its apps' sections too; only the framework's are read here.
  const kagi::Config conf =
      args.load_conf(kagi::config::Schema::framework(), kagi::Config::OtherSections::kSkip);
  const std::string dir = data_dir.value_or(conf.get_string("data.dir"));
  if (!data_dir && conf.get_string("data.backend") == "postgres") {
    // Rows in PostgreSQL have no torn tails or flipped bits for this tool to find: the
    // server checks its own pages (its WAL, data checksums, amcheck).
    std::cerr << "kagi-fsck: data.backend = \"postgres\": the data is in the database, which "
                 "checks its own integrity; kagi-fsck checks the files of data.backend = "
                 "\"files\" (or a folder given with --data)\n";
    return 2;
  }

  // What a power cut took from the logs and only a journal holds goes back first (opening
  // the folder replays the journals): scanned before, such a log would be reported damaged,
  // and a repair would rewrite it without records kagi had acknowledged.
  if (std::error_code exists; std::filesystem::is_directory(dir, exists)) {
    std::error_code ec;
    if (!kagi::store::DataDir::open(kagi::store::DataOptions{.dir = dir, .fsync = false}, ec)) {
      std::cerr << "kagi-fsck: cannot replay the journals of '" << dir << "': " << ec.message()
                << " (see the log above; docs/STORAGE.md, the journal)\n";
      return 2;
    }
  }

  std::vector<std::string> errors;
  const std::vector<LogReport> logs = kagi::apps::fsck::scan(dir, errors);
  for (const auto& e : errors) std::cerr << "kagi-fsck: " << e << "\n";
  if (logs.empty() && !errors.empty()) return 2;
  size_t damaged = 0;
  for (const auto& r : logs) {
    print(r);
    damaged += r.damaged();
  }
  std::cout << logs.size() << " logs, " << damaged << " damaged\n";
  if (damaged == 0) return 0;
  if (!do_repair) {
    std::cout << "run again with --repair to rewrite the damaged logs without the damage\n";
    return 1;
  }

  // The same lock service and data directory the apps open, from the same conf.
  const kagi::lock::LockOptions lock_options = kagi::lock_options(conf);
  std::unique_ptr<kagi::lock::LockService> locks;
  std::error_code ec;
  kagi::store::DataOptions data_options;
  data_options.dir = dir;
  data_options.fsync = conf.get_string("data.fsync") == "always";
  data_options.group_readable = conf.get_bool("data.group_readable");
  data_options.journal = conf.get_bool("data.journal");
  data_options.journal_kb = static_cast<uint64_t>(conf.get_int("data.journal_kb"));
  std::unique_ptr<kagi::store::DataDir> data;
  try {
    locks = kagi::lock::LockService::create(lock_options);
    data = kagi::store::DataDir::open(data_options, ec);
  } catch (const std::exception& e) {
    std::cerr << "kagi-fsck: cannot open the lock service (locks.dir '" << lock_options.dir
              << "'): " << e.what() << "\n";
    return 2;
  }
  if (!data) {
    std::cerr << "kagi-fsck: cannot open data.dir '" << dir << "': " << ec.message() << "\n";
    return 2;
  }
  // A repair takes the apps' locks: only in the lock domain the folder is written under.
  const kagi::store::Status claimed =
      kagi::store::claim_lock_domain(data->dir(), kagi::lock::lock_domain(lock_options), false);
  if (!claimed.ok()) {
    std::cerr << "kagi-fsck: " << claimed.message() << "\n";
    return 2;
  }
  auto ctx =
      locks->context({.request_id = "kagi-fsck", .method = "", .path = "", .client_address = ""});
  const std::string stamp = utc_stamp();
  size_t repaired = 0;
  for (const auto& r : logs) {
    if (!r.damaged()) continue;
    std::optional<std::string> lock_name = kagi::apps::fsck::app_lock_for(r.path);
    if (!lock_name && !offline) {
      std::cout << "skipped " << r.path
                << ": no app lock is known for it; stop the site and add --offline\n";
      continue;
    }
    try {
      auto guard = ctx->exclusive(lock_name.value_or("fsck/" + r.path));
      auto result = kagi::apps::fsck::repair(*data, guard, r.path, stamp);
      if (!result.ok()) {
        std::cout << "FAILED  " << r.path << ": " << result.status().message() << "\n";
        continue;
      }
      const auto& done = result.value();
      if (done.backup.empty()) {
        std::cout << "clean   " << r.path << ": no damage under the lock (compacted meanwhile?)\n";
      } else {
        std::cout << "repaired " << r.path << ": " << done.kept << " records kept, " << done.dropped
                  << " damaged bytes dropped; backup " << done.backup << "\n";
      }
      ++repaired;
    } catch (const kagi::lock::LockBusy& e) {
      std::cout << "FAILED  " << r.path << ": " << e.what() << "; try again\n";
    }
  }
  return repaired == damaged ? 3 : 1;
}
