#include <kagi/config/config.hpp>

#include <charconv>
#include <functional>
#include <sstream>
#include <toml.hpp>

#include <kagi/config/schema.hpp>

namespace kagi {
namespace {

using config::KeySpec;
using config::KeyType;

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

[[noreturn]] void bad_value(const KeySpec& spec, std::string_view text, std::string_view want) {
  throw ConfigError("config key '" + std::string(spec.key) + "': bad value '" + std::string(text) +
                    "', expected " + std::string(want));
}

std::string describe_range(const KeySpec& spec) {
  return "an integer from " + std::to_string(spec.min) + " to " + std::to_string(spec.max);
}

void check_int(const KeySpec& spec, int64_t v, std::string_view text) {
  if (v < spec.min || v > spec.max) bad_value(spec, text, describe_range(spec));
}

void check_choice(const KeySpec& spec, const std::string& v) {
  if (spec.choices.empty()) return;
  std::string_view choices = spec.choices;
  while (!choices.empty()) {
    size_t bar = choices.find('|');
    if (choices.substr(0, bar) == v) return;
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  bad_value(spec, v, "one of " + std::string(spec.choices));
}

// Parses the --set text form of a value for `spec`.
Config::Value parse_text(const KeySpec& spec, std::string_view text) {
  switch (spec.type) {
    case KeyType::kBool:
      if (text == "true") return true;
      if (text == "false") return false;
      bad_value(spec, text, "true or false");
    case KeyType::kInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) {
        bad_value(spec, text, describe_range(spec));
      }
      check_int(spec, v, text);
      return v;
    }
    case KeyType::kString: {
      std::string v(text);
      check_choice(spec, v);
      return v;
    }
    case KeyType::kStringList: {
      std::vector<std::string> items;
      std::string_view rest = text;
      while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string item = trim(rest.substr(0, comma));
        if (!item.empty()) items.push_back(std::move(item));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      return items;
    }
  }
  bad_value(spec, text, "a known type");
}

// Converts a TOML value for `spec`, rejecting a wrong type.
Config::Value from_toml(const KeySpec& spec, const toml::value& v) {
  switch (spec.type) {
    case KeyType::kBool:
      if (!v.is_boolean()) bad_value(spec, toml::format(v), "true or false");
      return v.as_boolean();
    case KeyType::kInt: {
      if (!v.is_integer()) bad_value(spec, toml::format(v), describe_range(spec));
      int64_t i = v.as_integer();
      check_int(spec, i, std::to_string(i));
      return i;
    }
    case KeyType::kString: {
      if (!v.is_string()) bad_value(spec, toml::format(v), "a string");
      std::string s = v.as_string();
      check_choice(spec, s);
      return s;
    }
    case KeyType::kStringList: {
      if (!v.is_array()) bad_value(spec, toml::format(v), "an array of strings");
      std::vector<std::string> items;
      for (const auto& item : v.as_array()) {
        if (!item.is_string()) bad_value(spec, toml::format(v), "an array of strings");
        items.push_back(item.as_string());
      }
      return items;
    }
  }
  bad_value(spec, "?", "a known type");
}

template <typename T>
const T& typed(const std::map<std::string, Config::Value, std::less<>>& values,
               std::string_view key) {
  auto it = values.find(key);
  if (it == values.end()) throw std::logic_error("config key not declared: " + std::string(key));
  const T* v = std::get_if<T>(&it->second);
  if (!v) throw std::logic_error("config key read with the wrong type: " + std::string(key));
  return *v;
}

}  // namespace

const KeySpec& Config::spec_or_throw(std::string_view key) const {
  if (const KeySpec* spec = schema_->find(key)) return *spec;
  const std::string_view section = key.substr(0, key.find('.'));
  if (key.find('.') == std::string_view::npos) {
    throw ConfigError("config key '" + std::string(key) + "' needs a section: section.key");
  }
  if (!schema_->has_section(section)) {
    throw ConfigError("unknown config key '" + std::string(key) + "': no section [" +
                      std::string(section) +
                      "] (no mounted app declares it); --help-conf lists every section and key");
  }
  throw ConfigError("unknown config key '" + std::string(key) + "' in [" + std::string(section) +
                    "]; --help-conf lists every key with its default");
}

Config::Config() : Config(config::Schema::framework()) {}

Config::Config(config::Schema schema)
    : schema_(std::make_shared<const config::Schema>(std::move(schema))) {
  for (const auto& spec : schema_->keys()) {
    values_[std::string(spec.key)] = parse_text(spec, spec.default_text);
  }
}

Config Config::defaults() { return Config(); }

Config Config::defaults(config::Schema schema) { return Config(std::move(schema)); }

Config Config::load(const std::optional<std::string>& file,
                    const std::vector<std::string>& overrides) {
  return load(config::Schema::framework(), file, overrides);
}

Config Config::load(config::Schema schema, const std::optional<std::string>& file,
                    const std::vector<std::string>& overrides, OtherSections other_sections) {
  Config conf = defaults(std::move(schema));
  const bool skip_other = other_sections == OtherSections::kSkip;
  auto declared = [&](std::string_view key) {
    return conf.schema_->has_section(key.substr(0, key.find('.')));
  };
  // A table inside a section holds dotted keys ([locks.postgres] dsn = ... is the key
  // locks.postgres.dsn), unless a key of that very name is declared.
  std::function<void(const std::string&, const toml::value&)> load_table =
      [&](const std::string& prefix, const toml::value& table) {
        for (const auto& [name, value] : table.as_table()) {
          std::string key = prefix + "." + name;
          if (value.is_table() && !conf.schema_->find(key)) {
            load_table(key, value);
            continue;
          }
          const KeySpec& spec = conf.spec_or_throw(key);
          conf.values_[key] = from_toml(spec, value);
        }
      };
  if (file) {
    toml::value root;
    try {
      root = toml::parse(*file);
    } catch (const std::exception& e) {
      throw ConfigError("cannot read config file " + *file + ": " + e.what());
    }
    if (!root.is_table()) throw ConfigError("config file " + *file + " is not a TOML table");
    for (const auto& [section, table] : root.as_table()) {
      if (!table.is_table()) {
        throw ConfigError("config file " + *file + ": '" + section +
                          "' must be a [section], not a value");
      }
      if (skip_other && !conf.schema_->has_section(section)) continue;
      load_table(section, table);
    }
  }
  for (const auto& assignment : overrides) {
    size_t eq = assignment.find('=');
    if (eq == std::string::npos) {
      throw ConfigError("--set needs section.key=value, got '" + assignment + "'");
    }
    const std::string key = trim(std::string_view(assignment).substr(0, eq));
    if (skip_other && !declared(key)) continue;
    conf.set(key, trim(std::string_view(assignment).substr(eq + 1)));
  }
  return conf;
}

void Config::set(std::string_view key, std::string_view text) {
  const KeySpec& spec = spec_or_throw(key);
  values_[std::string(key)] = parse_text(spec, text);
}

bool Config::get_bool(std::string_view key) const { return typed<bool>(values_, key); }
int64_t Config::get_int(std::string_view key) const { return typed<int64_t>(values_, key); }
std::string Config::get_string(std::string_view key) const {
  return typed<std::string>(values_, key);
}
std::vector<std::string> Config::get_strings(std::string_view key) const {
  return typed<std::vector<std::string>>(values_, key);
}

std::string Config::dump() const {
  std::ostringstream out;
  for (const auto& [key, value] : values_) {
    out << key << " = ";
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            out << (v ? "true" : "false");
          } else if constexpr (std::is_same_v<T, int64_t>) {
            out << v;
          } else if constexpr (std::is_same_v<T, std::string>) {
            out << '"' << v << '"';
          } else {
            out << '[';
            for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << '"' << v[i] << '"';
            out << ']';
          }
        },
        value);
    out << '\n';
  }
  return out.str();
}

}  // namespace kagi
