#include <kagi/http/json_body.hpp>

#include <cstdint>

namespace kagi::http {
namespace {

class Parser {
 public:
  Parser(std::string_view in, std::string& error) : in_(in), error_(error) {}

  bool fail(std::string_view what) {
    error_ = std::string(what) + " at byte " + std::to_string(pos_);
    return false;
  }

  void skip_space() {
    while (pos_ < in_.size() &&
           (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool eat(char c) {
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool at_end() const { return pos_ >= in_.size(); }

  // A JSON string starting at the opening quote, decoded to UTF-8.
  bool string(std::string& out) {
    if (!eat('"')) return fail("expected a string");
    while (true) {
      if (at_end()) return fail("unterminated string");
      auto c = static_cast<unsigned char>(in_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return fail("raw control character in a string");
      if (c == '\\') {
        if (!escape(out)) return false;
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      if (!utf8_sequence(out)) return false;
    }
  }

  size_t pos() const { return pos_; }

 private:
  bool escape(std::string& out) {
    ++pos_;  // the backslash
    if (at_end()) return fail("unterminated escape");
    char e = in_[pos_++];
    switch (e) {
      case '"':
        out += '"';
        return true;
      case '\\':
        out += '\\';
        return true;
      case '/':
        out += '/';
        return true;
      case 'b':
        out += '\b';
        return true;
      case 'f':
        out += '\f';
        return true;
      case 'n':
        out += '\n';
        return true;
      case 'r':
        out += '\r';
        return true;
      case 't':
        out += '\t';
        return true;
      case 'u':
        break;
      default:
        --pos_;
        return fail("invalid escape");
    }
    uint32_t cp = 0;
    if (!hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      uint32_t low = 0;
      if (!(eat('\\') && eat('u'))) return fail("high surrogate without its low half");
      if (!hex4(low)) return false;
      if (low < 0xDC00 || low > 0xDFFF) return fail("high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    put_utf8(out, cp);
    return true;
  }

  bool hex4(uint32_t& cp) {
    if (in_.size() - pos_ < 4) return fail("truncated \\u escape");
    for (int i = 0; i < 4; ++i) {
      char h = in_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') {
        cp |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        cp |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        cp |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        --pos_;
        return fail("invalid hex digit in \\u escape");
      }
    }
    return true;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One multi-byte UTF-8 sequence, checked (no overlongs, no surrogates, at most U+10FFFF).
  bool utf8_sequence(std::string& out) {
    auto b0 = static_cast<unsigned char>(in_[pos_]);
    size_t len = 0;
    uint32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
      cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      cp = b0 & 0x07;
    } else {
      return fail("invalid UTF-8");
    }
    if (in_.size() - pos_ < len) return fail("truncated UTF-8");
    for (size_t i = 1; i < len; ++i) {
      auto b = static_cast<unsigned char>(in_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return fail("invalid UTF-8");
    }
    out.append(in_.substr(pos_, len));
    pos_ += len;
    return true;
  }

  std::string_view in_;
  std::string& error_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<std::map<std::string, std::string, std::less<>>> parse_flat_json_object(
    std::string_view body, std::string& error, const JsonBodyLimits& limits) {
  if (body.size() > limits.max_bytes) {
    error = "the JSON body is larger than " + std::to_string(limits.max_bytes) + " bytes";
    return std::nullopt;
  }
  Parser p(body, error);
  std::map<std::string, std::string, std::less<>> members;
  p.skip_space();
  if (!p.eat('{')) {
    p.fail("expected '{'");
    return std::nullopt;
  }
  p.skip_space();
  if (!p.eat('}')) {
    while (true) {
      p.skip_space();
      std::string key;
      std::string value;
      if (!p.string(key)) return std::nullopt;
      p.skip_space();
      if (!p.eat(':')) {
        p.fail("expected ':'");
        return std::nullopt;
      }
      p.skip_space();
      const size_t value_at = p.pos();
      if (!p.string(value)) {
        error = "expected a string value at byte " + std::to_string(value_at);
        return std::nullopt;
      }
      if (members.contains(key)) {
        error = "duplicate key '" + key + "' at byte " + std::to_string(value_at);
        return std::nullopt;
      }
      if (members.size() == limits.max_keys) {
        error = "more than " + std::to_string(limits.max_keys) + " keys";
        return std::nullopt;
      }
      members.emplace(std::move(key), std::move(value));
      p.skip_space();
      if (p.eat('}')) break;
      if (!p.eat(',')) {
        p.fail("expected ',' or '}'");
        return std::nullopt;
      }
    }
  }
  p.skip_space();
  if (!p.at_end()) {
    p.fail("unexpected bytes after the object");
    return std::nullopt;
  }
  return members;
}

}  // namespace kagi::http
