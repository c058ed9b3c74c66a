#include <kagi/util/json.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace kagi::util {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (b(i + k) & 0x3F);
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// Printable ASCII that stands in a JSON string as it is: everything but the quote, the
// backslash and the three HTML-significant bytes. Runs of these are copied in one append.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x7F; ++c) plain[static_cast<size_t>(c)] = true;
  for (char c : {'"', '\\', '<', '>', '&'}) plain[static_cast<unsigned char>(c)] = false;
  return plain;
}();

void append_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default: {  // '<', '>', '&' and the other control characters
      static constexpr char kHex[] = "0123456789abcdef";
      const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out.append(escaped, sizeof escaped);
    }
  }
}

}  // namespace

void append_json_quoted(std::string& out, std::string_view text) {
  out += '"';
  size_t run = 0;  // start of the bytes not yet copied
  size_t i = 0;
  while (i < text.size()) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (kPlain[u]) {
      ++i;
      continue;
    }
    if (u >= 0x80) {
      if (size_t len = utf8_sequence(text, i)) {  // valid UTF-8 stays in the run
        i += len;
        continue;
      }
    }
    out.append(text.data() + run, i - run);
    if (u >= 0x80) {
      out += "\\ufffd";
    } else {
      append_escape(out, u);
    }
    run = ++i;
  }
  out.append(text.data() + run, i - run);
  out += '"';
}

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_json_quoted(out, text);
  return out;
}

void JsonWriter::separate() {
  if (need_comma_) out_ += ',';
  need_comma_ = true;
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ += '{';
  need_comma_ = false;
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  out_ += '}';
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ += '[';
  need_comma_ = false;
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  out_ += ']';
  need_comma_ = true;
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view name) {
  separate();
  append_json_quoted(out_, name);
  out_ += ':';
  need_comma_ = false;  // the value follows without a comma
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view text) {
  separate();
  append_json_quoted(out_, text);
  return *this;
}
JsonWriter& JsonWriter::value(int64_t number) {
  separate();
  append_integer(number);
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t number) {
  separate();
  append_integer(number);
  return *this;
}
JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_ += json;
  return *this;
}
template <typename Integer>
void JsonWriter::append_integer(Integer number) {
  char buf[24];  // the longest int64 or uint64 is 20 characters
  const auto end = std::to_chars(buf, buf + sizeof buf, number).ptr;
  out_.append(buf, static_cast<size_t>(end - buf));
}
JsonWriter& JsonWriter::value(double number) {
  separate();
  if (!std::isfinite(number)) {
    out_ += "null";  // JSON has no NaN or infinity
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", number);
    out_ += buf;
  }
  return *this;
}
JsonWriter& JsonWriter::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

}  // namespace kagi::util
