// kagi-locks: who holds which lock right now, on this host, in a terminal (for ssh sessions).
// Reads the status registry and the stats files under locks.dir directly; no kagi server
// needed. With locks.backend = "postgres" it also reads every host's locks from the lock
// server (locks.postgres.dsn), as the admin page does; with "lockd", or with --lockd, the
// holders and waiters of a kagi-lockd server (its STATUS), with each one's client address.
//
//   kagi-locks [--conf FILE] [--set locks.dir=DIR]... [--lockd HOST:PORT|unix:PATH] [--json]
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
    "usage: kagi-locks [--conf FILE] [--set section.key=value]... [--lockd ADDRESS] [--json]\n"
    "Prints the locks held and waited for by every kagi process on this host (from\n"
    "locks.dir) and, with locks.backend = \"postgres\" or \"lockd\", by every host (from the\n"
    "lock server); --lockd HOST:PORT (or unix:PATH) reads that kagi-lockd whatever the\n"
    "conf says; --json prints the /admin/locks.json document instead.\n";

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
  const auto status = kagi::apps::admin::collect_status(conf.get_string("locks.dir"), locks);
  std::cout << (json ? kagi::apps::admin::to_json(status) + "\n"
                     : kagi::apps::admin::to_text(status));
  return 0;
}
