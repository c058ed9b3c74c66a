// serve/command_line.hpp — the command line every kagi program shares.
//
// kagi::serve and the tools (kagi-locks, kagi-fsck) all take `--conf FILE`, `--set
// section.key=value` (repeatable) and `--help`; a program adds its own flags in its loop:
//
//   kagi::CommandLine args(argc, argv, "kagi-locks", kUsage);
//   bool json = false;
//   while (args.next()) {
//     if (args.take_conf_flags()) continue;
//     if (args.is("--json")) json = true;
//     else args.refuse();
//   }
//   kagi::Config conf = args.load_conf(kagi::config::Schema::framework(),
//                                      kagi::Config::OtherSections::kSkip);
//
// Mistakes end the process with exit code 2 and the usage text on stderr.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/config/config.hpp>

namespace kagi {

class CommandLine {
 public:
  CommandLine(int argc, char** argv, std::string program, std::string usage);

  // Moves to the next argument; false after the last.
  bool next();
  const std::string& arg() const { return arg_; }
  bool is(std::string_view flag) const { return arg_ == flag; }
  // The value of the current flag (the next argument); a usage error when there is none.
  std::string value();

  // Takes --conf FILE, --set KEY=VALUE and --help/-h (prints the usage, exits 0); true when
  // the current argument was one of them.
  bool take_conf_flags();
  // The current argument is not one this program knows: a usage error.
  [[noreturn]] void refuse() const;
  [[noreturn]] void usage_error(const std::string& message) const;

  // The conf the flags name (see Config::load); a ConfigError is printed and exits 2.
  Config load_conf(config::Schema schema,
                   Config::OtherSections other = Config::OtherSections::kRefuse) const;

  const std::string& program() const { return program_; }
  const std::string& usage() const { return usage_; }

 private:
  std::vector<std::string> args_;
  size_t next_ = 0;
  std::string arg_;
  std::string program_;
  std::string usage_;
  std::optional<std::string> conf_file_;
  std::vector<std::string> overrides_;
};

}  // namespace kagi
