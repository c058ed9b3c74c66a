#include <kagi/util/utf8.hpp>

#include <cstdint>

namespace kagi::util {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    // The first continuation byte's range carries the overlong, surrogate and U+10FFFF
    // checks (RFC 3629 section 4); later continuation bytes are always 80..BF.
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b == 0xE0) {
      len = 3;
      lo = 0xA0;  // E0 80..9F would be overlong
    } else if (b == 0xED) {
      len = 3;
      hi = 0x9F;  // ED A0..BF would be a surrogate
    } else if (b >= 0xE1 && b <= 0xEF) {
      len = 3;
    } else if (b == 0xF0) {
      len = 4;
      lo = 0x90;  // F0 80..8F would be overlong
    } else if (b >= 0xF1 && b <= 0xF3) {
      len = 4;
    } else if (b == 0xF4) {
      len = 4;
      hi = 0x8F;  // F4 90.. would be above U+10FFFF
    } else {
      return false;  // 80..C1 (stray continuation or overlong lead), F5..FF
    }
    if (n - i < len) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

std::string strip_control_chars(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b == '\r') {
      if (keep_newlines) {
        out.push_back('\n');
        if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
      }
    } else if (b == '\n' || b == '\t') {
      if (keep_newlines) out.push_back(static_cast<char>(b));
    } else if (b < 0x20 || b == 0x7F) {
      // dropped
    } else if (b == 0xC2 && i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) >= 0x80 &&
               static_cast<uint8_t>(s[i + 1]) <= 0x9F) {
      ++i;  // a C1 control, U+0080..U+009F
    } else {
      out.push_back(static_cast<char>(b));
    }
  }
  return out;
}

std::string strip_bidi_controls(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    // Every control is 3 bytes: E2 80 8E/8F/AA..AE, E2 81 A6..A9; or 2 bytes: D8 9C.
    if (b0 == 0xE2 && i + 2 < s.size()) {
      const auto b1 = static_cast<unsigned char>(s[i + 1]);
      const auto b2 = static_cast<unsigned char>(s[i + 2]);
      if ((b1 == 0x80 && (b2 == 0x8E || b2 == 0x8F || (b2 >= 0xAA && b2 <= 0xAE))) ||
          (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)) {
        i += 3;
        continue;
      }
    } else if (b0 == 0xD8 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x9C) {
      i += 2;
      continue;
    }
    out += s[i++];
  }
  return out;
}

}  // namespace kagi::util
