// Fuzzes percent_decode / percent_encode: decode(encode(x)) == x for every byte string,
// encode emits only unreserved characters and %XX, and decode fails exactly on a '%' not
// followed by two hex digits.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <kagi/http/form.hpp>
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  const std::string encoded = kagi::http::percent_encode(in);
  FUZZ_CHECK(encoded.size() >= in.size() && encoded.size() <= 3 * in.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    const char c = encoded[i];
    if (c == '%') {
      FUZZ_CHECK(i + 2 < encoded.size());
      FUZZ_CHECK(std::isxdigit(static_cast<unsigned char>(encoded[i + 1])));
      FUZZ_CHECK(std::isxdigit(static_cast<unsigned char>(encoded[i + 2])));
      i += 2;
    } else {
      FUZZ_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
                 c == '~');
    }
  }
  FUZZ_CHECK(kagi::http::percent_decode(encoded, true) == std::string(in));
  FUZZ_CHECK(kagi::http::percent_decode(encoded, false) == std::string(in));

  bool well_formed = true;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') continue;
    if (in.size() - i < 3) {
      well_formed = false;
      break;
    }
    if (!std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      well_formed = false;
      break;
    }
    i += 2;
  }
  for (const bool plus : {false, true}) {
    const auto decoded = kagi::http::percent_decode(in, plus);
    FUZZ_CHECK(decoded.has_value() == well_formed);
    if (!decoded) continue;
    FUZZ_CHECK(decoded->size() <= in.size());
    FUZZ_CHECK(kagi::http::percent_decode(kagi::http::percent_encode(*decoded), plus) == decoded);
  }
  return 0;
}
