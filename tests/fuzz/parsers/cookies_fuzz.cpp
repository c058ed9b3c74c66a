// Fuzzes parse_cookies: never crashes, fails only on too many cookies (and then leaves
// `out` untouched), and every cookie it returns is a plausible name/value pair.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <kagi/http/form.hpp>
#include "fuzz_check.hpp"

using kagi::http::FormLimits;
using kagi::http::Params;
using kagi::http::ParseError;

namespace {
bool is_ows(char c) { return c == ' ' || c == '\t'; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  FormLimits limits;
  limits.max_fields = data[0] % 16;
  const std::string_view header(reinterpret_cast<const char*>(data) + 1, size - 1);

  Params out;
  out.add("pre", "existing");
  const ParseError e = kagi::http::parse_cookies(header, limits, out);
  FUZZ_CHECK(e == ParseError::kNone || e == ParseError::kTooMany);
  if (e != ParseError::kNone) {
    FUZZ_CHECK(out.size() == 1);
    // Without a limit the same header parses, into more cookies than the limit.
    FormLimits no_limit;
    no_limit.max_fields = size;
    Params unlimited;
    FUZZ_CHECK(kagi::http::parse_cookies(header, no_limit, unlimited) == ParseError::kNone);
    FUZZ_CHECK(unlimited.size() > limits.max_fields);
    return 0;
  }
  FUZZ_CHECK(out.size() - 1 <= limits.max_fields);
  size_t bytes = 0;
  for (size_t i = 1; i < out.size(); ++i) {
    const auto& [name, value] = out.items()[i];
    FUZZ_CHECK(!name.empty());
    FUZZ_CHECK(!is_ows(name.front()) && !is_ows(name.back()));
    FUZZ_CHECK(name.find_first_of(";=") == std::string::npos);
    FUZZ_CHECK(value.find(';') == std::string::npos);
    // Every name appears in the header, in order.
    FUZZ_CHECK(header.find(name) != std::string_view::npos);
    bytes += name.size() + value.size();
  }
  FUZZ_CHECK(bytes <= header.size());
  return 0;
}
