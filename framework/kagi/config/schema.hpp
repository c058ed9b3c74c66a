// config/schema.hpp — which configuration keys exist: type, default, allowed values, meaning.
//
// A Schema starts with the framework's own sections (server, limits, locks, data, templates,
// log, security: Schema::framework()); every app a site mounts adds its own section:
//
//   constexpr kagi::config::KeySpec kGuestbookKeys[] = {
//       {"guestbook.max_entries", kagi::config::KeyType::kInt, "500", 1, 100000, "",
//        "entries kept"},
//   };
//   schema.add_section("guestbook", kGuestbookKeys, "the guestbook app");
//
// Config::load refuses a key no section declares, so a typo is an error at start-up, never a
// silently ignored setting. The KeySpec strings are views: declare them with static storage
// (a constexpr array), as above.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::config {

enum class KeyType { kBool, kInt, kString, kStringList };

struct KeySpec {
  std::string_view key;  // "section.key"
  KeyType type;
  std::string_view default_text;  // in --set form: "4", "true", "a,b"
  int64_t min = 0, max = 0;       // kInt: inclusive range
  std::string_view choices;       // kString: "a|b|c" when only those are allowed; else ""
  std::string_view doc;
};

class Schema {
 public:
  // The framework's sections only.
  static Schema framework();

  // Declares an app's section. Every key must be "<section>.<name>" and the section must not
  // be declared yet: anything else is a programming error in the app and throws
  // std::logic_error naming the key. (A default that is not a valid value of its key is
  // refused by Config::load, as a ConfigError naming the key.)
  void add_section(std::string_view section, std::span<const KeySpec> keys,
                   std::string_view doc = {});

  // The spec of `key`, or nullptr when no section declares it.
  const KeySpec* find(std::string_view key) const;
  bool has_section(std::string_view section) const;
  // Every key, framework sections first, then the apps' in the order they were added.
  const std::vector<KeySpec>& keys() const { return keys_; }

  // Every key with its default, type (range or choices) and meaning, by section, as a TOML
  // file whose values are the defaults: what `--help-conf` prints (a starting conf file).
  std::string describe() const;

 private:
  struct Section {
    std::string name;
    std::string doc;
  };
  std::vector<Section> sections_;
  std::vector<KeySpec> keys_;
};

}  // namespace kagi::config
