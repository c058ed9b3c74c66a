// config/config.hpp — kagi's configuration: conf/kagi.toml, typed and validated.
//
// Every key is declared once, with its type, default and meaning, in a config::Schema: the
// framework's sections (config/schema.cpp) plus one section per mounted app (declared by the
// app, see app/site.hpp); conf/kagi.toml documents the sample site's keys. Loading applies,
// in order: the defaults, the TOML file (--conf FILE), then each --set section.key=value. An
// unknown key or a value of the wrong type or range is a ConfigError that names the key and
// says what is expected; kagi::serve reports it and exits 2.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <kagi/config/schema.hpp>

namespace kagi {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Config {
 public:
  using Value = std::variant<bool, int64_t, std::string, std::vector<std::string>>;

  // What load() does with a section the schema does not declare: refuse it (a site's own
  // program), or skip it (a tool such as kagi-locks that reads a site's conf file for the
  // framework's sections and knows nothing of the site's apps). Keys of a declared section
  // are always checked.
  enum class OtherSections { kRefuse, kSkip };

  // The framework sections' defaults (as defaults()).
  Config();

  // The defaults of every key of `schema` (framework sections only when not given).
  static Config defaults();
  static Config defaults(config::Schema schema);
  // Defaults, then `file` if given, then each "section.key=value" override.
  static Config load(const std::optional<std::string>& file,
                     const std::vector<std::string>& overrides);
  static Config load(config::Schema schema, const std::optional<std::string>& file,
                     const std::vector<std::string>& overrides,
                     OtherSections other_sections = OtherSections::kRefuse);

  // The keys this configuration knows.
  const config::Schema& schema() const { return *schema_; }

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
  explicit Config(config::Schema schema);
  const config::KeySpec& spec_or_throw(std::string_view key) const;

  std::shared_ptr<const config::Schema> schema_;
  std::map<std::string, Value, std::less<>> values_;
};

}  // namespace kagi
