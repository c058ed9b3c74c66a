#include <kagi/serve/command_line.hpp>

#include <cstdlib>
#include <iostream>

namespace kagi {

CommandLine::CommandLine(int argc, char** argv, std::string program, std::string usage)
    : args_(argv + (argc > 0 ? 1 : 0), argv + argc),
      program_(std::move(program)),
      usage_(std::move(usage)) {}

bool CommandLine::next() {
  if (next_ >= args_.size()) return false;
  arg_ = args_[next_++];
  return true;
}

std::string CommandLine::value() {
  if (next_ >= args_.size()) usage_error(arg_ + " needs a value");
  return args_[next_++];
}

bool CommandLine::take_conf_flags() {
  if (is("--conf")) {
    conf_file_ = value();
  } else if (is("--set")) {
    overrides_.push_back(value());
  } else if (is("--help") || is("-h")) {
    std::cout << usage_;
    std::exit(0);
  } else {
    return false;
  }
  return true;
}

void CommandLine::refuse() const { usage_error("unknown argument '" + arg_ + "'"); }

void CommandLine::usage_error(const std::string& message) const {
  std::cerr << program_ << ": " << message << "\n" << usage_;
  std::exit(2);
}

Config CommandLine::load_conf(config::Schema schema, Config::OtherSections other) const {
  try {
    return Config::load(std::move(schema), conf_file_, overrides_, other);
  } catch (const ConfigError& e) {
    std::cerr << program_ << ": " << e.what() << "\n";
    std::exit(2);
  }
}

}  // namespace kagi
