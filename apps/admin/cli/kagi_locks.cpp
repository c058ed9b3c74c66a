// kagi-locks: who holds which lock right now, on this host, in a terminal (for ssh sessions).
// Reads the status registry and the stats files under locks.dir directly; no server needed.
//
//   kagi-locks [--conf FILE] [--set locks.dir=DIR]... [--json]
//
// Exit codes: 0 (also when nothing is held), 2 for a bad command line or config.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <kagi/config/config.hpp>
#include "admin/status.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kagi-locks [--conf FILE] [--set section.key=value]... [--json]\n"
    "Prints the locks held and waited for by every kagi process on this host (from\n"
    "locks.dir); --json prints the /admin/locks.json document instead.\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "kagi-locks: " << message << "\n" << kUsage;
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::string> conf_file;
  std::vector<std::string> overrides;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--conf") {
      conf_file = value();
    } else if (arg == "--set") {
      overrides.push_back(value());
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      usage_error("unknown argument '" + arg + "'");
    }
  }
  kagi::Config conf;
  try {
    conf = kagi::Config::load(conf_file, overrides);
  } catch (const kagi::ConfigError& e) {
    std::cerr << "kagi-locks: " << e.what() << "\n";
    return 2;
  }
  const auto status = kagi::apps::admin::collect_status(conf.get_string("locks.dir"));
  std::cout << (json ? kagi::apps::admin::to_json(status) + "\n"
                     : kagi::apps::admin::to_text(status));
  return 0;
}
