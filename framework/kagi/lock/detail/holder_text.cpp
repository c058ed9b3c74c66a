#include <kagi/lock/detail/holder_text.hpp>

#include <cctype>
#include <cstring>

namespace kagi::lock::detail {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

void append_holder_text(std::string& out, std::string_view text, size_t max) {
  static const char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : text.substr(0, max)) {
    if (std::isalnum(c) || std::strchr("/._~-", c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
}

std::string holder_fields(const HolderInfo& who) {
  std::string out;
  append_holder_text(out, who.request_id, 40);
  out += ' ';
  append_holder_text(out, who.method, 16);
  out += ' ';
  append_holder_text(out, who.path, 160);
  return out;
}

std::string decode_holder_text(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
        hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace kagi::lock::detail
