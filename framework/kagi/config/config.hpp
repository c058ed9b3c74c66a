// config/config.hpp — kagi's configuration: conf/kagi.toml, typed and validated.
//
// Every key kagi knows is declared once, with its type, default and meaning, in
// config/schema.cpp; conf/kagi.toml documents the same keys. Loading applies, in order:
// the defaults, the TOML file (--conf FILE), then each --set section.key=value. An unknown
// key or a value of the wrong type or range is a ConfigError that names the key and says
// what is expected; kagi-demo reports it and exits 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kagi {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Config {
 public:
  using Value = std::variant<bool, int64_t, std::string, std::vector<std::string>>;

  // The embedded defaults only (what scripts/demo runs with).
  static Config defaults();
  // Defaults, then `file` if given, then each "section.key=value" override.
  static Config load(const std::optional<std::string>& file,
                     const std::vector<std::string>& overrides);

  // Sets one key from its text form (as given to --set); lists are comma-separated.
  void set(std::string_view key, std::string_view text);

  // Typed reads of a declared key. Reading an undeclared key, or with the wrong type, is a
  // programming error: throws std::logic_error.
  bool get_bool(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<std::string> get_strings(std::string_view key) const;

  // Every key with its current value in TOML-ish text ("server.threads = 4"), sorted.
  std::string dump() const;

 private:
  std::map<std::string, Value, std::less<>> values_;
};

}  // namespace kagi
