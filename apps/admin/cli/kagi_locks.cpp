// kagi-locks: who holds which lock right now, on this host, in a terminal (for ssh sessions).
// Reads the status registry and the stats files under locks.dir directly; no kagi server
// needed. With locks.backend = "postgres" it also reads every host's locks from the lock
// server (locks.postgres.dsn), and with "dir" every host's holders from the owner records in
// the shared locks.dir (this host's registry is then locks.dir/hosts/<locks.dir_host_id>), as
// the admin page does.
//
//   kagi-locks [--conf FILE] [--set locks.dir=DIR]... [--json]
//
// Exit codes: 0 (also when nothing is held, and when the lock server cannot be read: that is
// printed as an error line), 2 for a bad command line or config.
#include <iostream>
#include <string>

#include <kagi/app/lock_conf.hpp>
#include <kagi/serve/command_line.hpp>
#include "admin/status.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kagi-locks [--conf FILE] [--set section.key=value]... [--json]\n"
    "Prints the locks held and waited for by every kagi process on this host (from\n"
    "locks.dir) and, with locks.backend = \"postgres\" or \"dir\", by every host (from\n"
    "the lock server, or the owner records in the shared locks.dir); --json prints the\n"
    "/admin/locks.json document instead.\n";

}  // namespace

int main(int argc, char** argv) {
  kagi::CommandLine args(argc, argv, "kagi-locks", kUsage);
  bool json = false;
  while (args.next()) {
    if (args.take_conf_flags()) continue;
    if (args.is("--json")) {
      json = true;
    } else {
      args.refuse();
    }
  }
  // The site's conf file names its apps' sections too; only the framework's are read here.
  const kagi::Config conf =
      args.load_conf(kagi::config::Schema::framework(), kagi::Config::OtherSections::kSkip);
  const kagi::lock::LockOptions locks = kagi::lock_options(conf);
  const auto status = kagi::apps::admin::collect_status(kagi::lock::host_state_dir(locks), locks);
  std::cout << (json ? kagi::apps::admin::to_json(status) + "\n"
                     : kagi::apps::admin::to_text(status));
  return 0;
}
