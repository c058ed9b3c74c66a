// store/record_fields.hpp — one record of tab-separated fields, the on-disk form of an item in a
// log (a post, a chat message). In each field '\\', tab and newline are escaped, so any text fits
// in one record and a record never spans lines.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::store {

// The fields joined by tabs, each escaped.
std::string join_fields(std::initializer_list<std::string_view> fields);

// Exactly `count` unescaped fields, or nullopt for a record with another field count or a bad
// escape (a foreign or damaged record is skipped, never misread).
std::optional<std::vector<std::string>> split_fields(std::string_view record, size_t count);

// A whole decimal integer, or nullopt.
std::optional<int64_t> parse_int(std::string_view text);

}  // namespace kagi::store
