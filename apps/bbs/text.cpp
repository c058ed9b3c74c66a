#include "bbs/text.hpp"

#include <cctype>

namespace kagi::apps::bbs {
namespace {

bool is_url_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '-':
    case '.':
    case '_':
    case '~':
    case ':':
    case '/':
    case '?':
    case '#':
    case '[':
    case ']':
    case '@':
    case '!':
    case '$':
    case '&':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
    case '%':
      return true;
    default:
      return false;
  }
}

// Punctuation that ends a sentence rather than a URL: "see https://x.org/a."
bool is_trailing_punct(char c) {
  return c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?' || c == ')';
}

// Length of the URL starting at `text` (which starts with http:// or https://), or 0.
size_t url_length(std::string_view text) {
  size_t scheme = text.starts_with("https://") ? 8 : text.starts_with("http://") ? 7 : 0;
  if (scheme == 0) return 0;
  size_t end = scheme;
  while (end < text.size() && is_url_char(text[end])) ++end;
  while (end > scheme && is_trailing_punct(text[end - 1])) --end;
  return end > scheme ? end : 0;
}

}  // namespace

size_t char_count(std::string_view utf8) {
  size_t count = 0;
  for (char c : utf8) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;  // not a continuation byte
  }
  return count;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string body_html(std::string_view body) {
  std::string out;
  out.reserve(body.size() + 64);
  size_t i = 0;
  while (i < body.size()) {
    size_t next = body.find("http", i);
    if (next == std::string_view::npos) {
      out += html_escape(body.substr(i));
      break;
    }
    // A URL must start a word: "xhttp://" is not a link, "(http://" is.
    const bool word_start = next == 0 || !std::isalnum(static_cast<unsigned char>(body[next - 1]));
    size_t len = word_start ? url_length(body.substr(next)) : 0;
    if (len == 0) {
      out += html_escape(body.substr(i, next + 4 - i));
      i = next + 4;
      continue;
    }
    out += html_escape(body.substr(i, next - i));
    std::string url = html_escape(body.substr(next, len));
    out += "<a href=\"" + url + "\" rel=\"nofollow ugc noopener\">" + url + "</a>";
    i = next + len;
  }
  return out;
}

}  // namespace kagi::apps::bbs
