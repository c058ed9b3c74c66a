// kagi-locks: who holds which lock right now, on this host, in a terminal (for ssh sessions).
// Reads the status registry and the stats files under locks.dir directly; no kagi server
// needed. With locks.backend = "postgres" it also reads every host's locks from the lock
// server (locks.postgres.dsn), and with "dir" every host's holders from the owner records in
// the shared locks.dir (this host's registry is then locks.dir/hosts/<locks.dir_host_id>), as
// the admin page does; with "lockd", or with --lockd, the holders and waiters of a kagi-lockd
// server (its STATUS), with each one's client address; and the offline locks sessions hold,
// from where the site keeps them (data.dir's offline.sqlite3, or the data's database).
//
//   kagi-locks [--conf FILE] [--set locks.dir=DIR]... [--lockd HOST:PORT|unix:PATH] [--json]
//
// Exit codes: 0 (also when nothing is held, and when the lock server cannot be read: that is
// printed as an error line), 2 for a bad command line or config.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <kagi/app/lock_conf.hpp>
#include <kagi/serve/command_line.hpp>
#include "admin/status.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kagi-locks [--conf FILE] [--set section.key=value]... [--lockd ADDRESS] [--json]\n"
    "Prints the locks held and waited for by every kagi process on this host (from\n"
    "locks.dir) and, with locks.backend = \"postgres\", \"dir\" or \"lockd\", by every host\n"
    "(from the lock server, or the owner records in the shared locks.dir); --lockd HOST:PORT\n"
    "(or unix:PATH) reads that kagi-lockd whatever the conf says; --json prints the\n"
    "/admin/locks.json document instead.\n";

// The offline locks, if the site keeps any: a SQLite file that is not there yet is not made
// here (this tool only looks).
std::optional<kagi::apps::admin::OfflineStatus> offline_locks(const kagi::Config& conf) {
  const kagi::offline::StateOptions options = kagi::offline_state_options(conf);
  if (options.backend == "sqlite" &&
      !std::filesystem::exists(options.dir + "/" + std::string(kagi::offline::kSqliteFile))) {
    return std::nullopt;
  }
  std::string why;
  std::shared_ptr<kagi::offline::StateStore> state = kagi::offline::open_state_store(options, &why);
  if (!state) {
    kagi::apps::admin::OfflineStatus failed;
    failed.error = why;
    return failed;
  }
  kagi::offline::LockManager locks(state, kagi::offline_lock_options(conf));
  kagi::offline::SessionStore sessions(state, kagi::session_options(conf));
  return kagi::apps::admin::collect_offline(locks, sessions);
}

}  // namespace

int main(int argc, char** argv) {
  kagi::CommandLine args(argc, argv, "kagi-locks", kUsage);
  bool json = false;
  std::string lockd;
  while (args.next()) {
    if (args.take_conf_flags()) continue;
    if (args.is("--lockd")) {
      lockd = args.value();
    } else if (args.is("--json")) {
      json = true;
    } else {
      args.refuse();
    }
  }
  // The site's conf file names its apps' sections too; only the framework's are read here.
  const kagi::Config conf =
      args.load_conf(kagi::config::Schema::framework(), kagi::Config::OtherSections::kSkip);
  kagi::lock::LockOptions locks = kagi::lock_options(conf);
  if (!lockd.empty()) {
    locks.backend = "lockd";
    locks.lockd.address = lockd;
  }
  auto status = kagi::apps::admin::collect_status(kagi::lock::host_state_dir(locks), locks);
  status.offline = offline_locks(conf);
  std::cout << (json ? kagi::apps::admin::to_json(status) + "\n"
                     : kagi::apps::admin::to_text(status));
  return 0;
}
