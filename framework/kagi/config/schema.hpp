// config/schema.hpp — the declaration of every configuration key: type, default, allowed
// values, one line of meaning. conf/kagi.toml repeats these with longer comments.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

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

std::span<const KeySpec> schema();
const KeySpec* find_key(std::string_view key);

}  // namespace kagi::config
