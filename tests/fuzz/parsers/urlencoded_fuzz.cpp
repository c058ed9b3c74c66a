// Fuzzes parse_urlencoded: never crashes, respects its limits, leaves `out` untouched on
// error, and percent-encoding what it parsed and parsing that again gives the same fields.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <kagi/http/form.hpp>
#include "fuzz_check.hpp"

using kagi::http::FormLimits;
using kagi::http::Params;
using kagi::http::ParseError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first two bytes pick small limits, so the limit paths are reached often.
  FormLimits limits;
  limits.max_fields = data[0] % 32;
  limits.max_field_bytes = data[1] % 64;
  const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);

  Params out;
  out.add("pre", "existing");
  const ParseError e = kagi::http::parse_urlencoded(in, limits, out);
  FUZZ_CHECK(out.items().front() == Params::Item("pre", "existing"));
  if (e != ParseError::kNone) {
    FUZZ_CHECK(out.size() == 1);
    return 0;
  }
  FUZZ_CHECK(out.size() - 1 <= limits.max_fields);

  // One field per non-empty '&'-separated pair.
  size_t pairs = 0;
  for (size_t start = 0; start <= in.size();) {
    const size_t amp = std::min(in.find('&', start), in.size());
    if (amp > start) ++pairs;
    start = amp + 1;
  }
  FUZZ_CHECK(out.size() - 1 == pairs);

  std::string encoded;
  for (size_t i = 1; i < out.size(); ++i) {
    const auto& [name, value] = out.items()[i];
    FUZZ_CHECK(name.size() <= limits.max_field_bytes);
    FUZZ_CHECK(value.size() <= limits.max_field_bytes);
    if (!encoded.empty()) encoded += '&';
    encoded += kagi::http::percent_encode(name) + "=" + kagi::http::percent_encode(value);
  }
  Params again;
  again.add("pre", "existing");
  FUZZ_CHECK(kagi::http::parse_urlencoded(encoded, limits, again) == ParseError::kNone);
  FUZZ_CHECK(again.items() == out.items());
  return 0;
}
