// Fuzzes valid_utf8 against a straightforward reference decoder (decode each code point,
// then check its range and that it used the shortest form), and strip_control_chars: on
// valid input the output is valid, free of control characters, and stripping is idempotent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <kagi/util/utf8.hpp>
#include "fuzz_check.hpp"

namespace {

bool reference_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t len = b < 0x80           ? 1
                 : (b >> 5) == 0x6  ? 2
                 : (b >> 4) == 0xE  ? 3
                 : (b >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c >> 6) != 0x2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const size_t shortest = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (len != shortest || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const bool valid = kagi::util::valid_utf8(in);
  FUZZ_CHECK(valid == reference_valid(in));

  for (const bool keep : {false, true}) {
    const std::string out = kagi::util::strip_control_chars(in, keep);
    FUZZ_CHECK(out.size() <= in.size());
    if (!valid) continue;  // broken input is not repaired: no promises beyond no crash
    FUZZ_CHECK(kagi::util::valid_utf8(out));
    for (size_t i = 0; i < out.size(); ++i) {
      const auto b = static_cast<uint8_t>(out[i]);
      FUZZ_CHECK(b >= 0x20 || (keep && (b == '\n' || b == '\t')));
      FUZZ_CHECK(b != 0x7F);
      if (b == 0xC2) FUZZ_CHECK(static_cast<uint8_t>(out[i + 1]) >= 0xA0);
    }
    FUZZ_CHECK(kagi::util::strip_control_chars(out, keep) == out);
  }
  return 0;
}
