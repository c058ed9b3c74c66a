// Fuzzes the JSON body parser (http/json_body.hpp), meant for hostile input. Byte 0
// picks max_keys (0..19); the rest is the body. Invariants: an answer has an error exactly
// when it has no value; a body over max_bytes is refused; a parsed object stays within
// max_keys and holds only valid UTF-8; and writing the parsed object back as JSON (with an
// escaper written here) parses to the same object.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <kagi/http/json_body.hpp>
#include <kagi/util/utf8.hpp>
#include "fuzz_check.hpp"

namespace {

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  kagi::http::JsonBodyLimits limits;
  limits.max_keys = data[0] % 20;
  limits.max_bytes = 4096;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string error;
  const auto parsed = kagi::http::parse_flat_json_object(body, error, limits);
  FUZZ_CHECK(parsed.has_value() == error.empty());
  if (body.size() > limits.max_bytes) FUZZ_CHECK(!parsed);
  if (!parsed) return 0;

  FUZZ_CHECK(parsed->size() <= limits.max_keys);
  std::string again = "{";
  for (const auto& [key, value] : *parsed) {
    FUZZ_CHECK(kagi::util::valid_utf8(key) && kagi::util::valid_utf8(value));
    if (again.size() > 1) again += ',';
    again += quoted(key) + ":" + quoted(value);
  }
  again += "}";
  limits.max_bytes = again.size() + 1;
  std::string error2;
  const auto reparsed = kagi::http::parse_flat_json_object(again, error2, limits);
  FUZZ_CHECK(reparsed.has_value());
  FUZZ_CHECK(*reparsed == *parsed);
  return 0;
}
