#include "chat/bidi.hpp"

#include <cstdint>

namespace kagi::apps::chat {

std::string strip_bidi_controls(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 == 0xD8 && i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) == 0x9C) {
      ++i;  // U+061C ALM: D8 9C
      continue;
    }
    if (b0 == 0xE2 && i + 2 < s.size()) {
      const auto b1 = static_cast<uint8_t>(s[i + 1]);
      const auto b2 = static_cast<uint8_t>(s[i + 2]);
      const bool marks = b1 == 0x80 && (b2 == 0x8E || b2 == 0x8F);   // U+200E, U+200F
      const bool embeds = b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE;    // U+202A–U+202E
      const bool isolates = b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9;  // U+2066–U+2069
      if (marks || embeds || isolates) {
        i += 2;
        continue;
      }
    }
    out.push_back(static_cast<char>(b0));
  }
  return out;
}

}  // namespace kagi::apps::chat
