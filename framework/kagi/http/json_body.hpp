// http/json_body.hpp — a small, strict parser for a JSON request body that is one flat object
// whose values are all strings, e.g. {"name":"ann","text":"hi"} (what the chat posts).
//
// The pipeline parses only form bodies; a handler that takes JSON calls this. The parser is meant
// for hostile input: it never reads out of bounds, never recurses, caps the number of keys,
// and refuses (with a message saying what and where) anything that is not exactly a flat
// object of strings: nested values, numbers, duplicate keys, trailing bytes, raw control
// characters, invalid escapes, lone UTF-16 surrogates, invalid UTF-8.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kagi::http {

struct JsonBodyLimits {
  size_t max_keys = 16;
  size_t max_bytes = 64 * 1024;
};

// The object's members, or nullopt with `error` set ("expected a string value at byte 12").
std::optional<std::map<std::string, std::string, std::less<>>> parse_flat_json_object(
    std::string_view body, std::string& error, const JsonBodyLimits& limits = {});

}  // namespace kagi::http
