// multipart/form-data (RFC 7578 on the RFC 2046 framing): the boundary parameter of the
// Content-Type, and the body parser that splits parts into fields and uploaded files.
//
// The framing is parsed strictly, so that kagi and a careful proxy in front of it agree on
// where a part ends: a delimiter is a whole line ("--boundary", optional spaces/tabs, the
// line end); anything that merely starts like one is data. The first delimiter line fixes
// the body's line ending: CRLF (RFC 2046, every browser) or bare LF (hand-written clients).
// In a CRLF body a bare-LF "--boundary" line is data; in a bare-LF body CRLF delimiter
// lines count too, and part header lines must end in LF alone.
#include <algorithm>
#include <vector>

#include <kagi/http/form.hpp>
#include <kagi/http/headers.hpp>

namespace kagi::http {
namespace {

// Part header lines longer than this, or more of them, are malformed: browsers send two or
// three short lines, and the limits bound the work a hostile body can cause.
constexpr size_t kMaxHeaderLine = 8 * 1024;
constexpr size_t kMaxPartHeaders = 16;
constexpr size_t kMaxBoundary = 70;  // RFC 2046 section 5.1.1

bool is_tchar(char c) {  // RFC 9110 token characters
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_bchar(char c) {  // RFC 2046 boundary characters
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

bool valid_boundary(std::string_view b) {
  return !b.empty() && b.size() <= kMaxBoundary && b.back() != ' ' &&
         std::all_of(b.begin(), b.end(), is_bchar);
}

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

void skip_ows(std::string_view& s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
}

struct HeaderParam {
  std::string name;  // lower-cased
  std::string value;
};

// Parses `*( OWS ";" OWS name "=" value )` where value is a token-like run or a
// quoted-string with backslash escapes. False on a syntax error (unterminated quote,
// control character, missing '=' ...). Unquoted values are accepted leniently (any
// visible character but ';' and '"'), since clients often leave boundaries unquoted.
bool parse_header_params(std::string_view s, std::vector<HeaderParam>& out) {
  for (;;) {
    skip_ows(s);
    if (s.empty()) return true;
    if (s.front() != ';') return false;
    s.remove_prefix(1);
    skip_ows(s);
    if (s.empty()) return true;  // a trailing ';' is harmless
    HeaderParam param;
    while (!s.empty() && is_tchar(s.front())) {
      char c = s.front();
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      param.name.push_back(c);
      s.remove_prefix(1);
    }
    if (param.name.empty()) return false;
    skip_ows(s);
    if (s.empty() || s.front() != '=') return false;
    s.remove_prefix(1);
    skip_ows(s);
    if (!s.empty() && s.front() == '"') {
      s.remove_prefix(1);
      bool closed = false;
      while (!s.empty()) {
        char c = s.front();
        s.remove_prefix(1);
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (s.empty()) return false;
          c = s.front();
          s.remove_prefix(1);
        }
        // qdtext and quoted-pair: HTAB, SP, visible ASCII, obs-text; no other controls.
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\t') || u == 0x7F) return false;
        param.value.push_back(c);
      }
      if (!closed) return false;
    } else {
      while (!s.empty() && s.front() != ';' && s.front() != '"' &&
             static_cast<unsigned char>(s.front()) > 0x20 && s.front() != 0x7F) {
        param.value.push_back(s.front());
        s.remove_prefix(1);
      }
      if (param.value.empty()) return false;
    }
    out.push_back(std::move(param));
  }
}

// Splits "type; params" and checks the type. False on a syntax error or another type.
bool parse_typed_header(std::string_view value, std::string_view expected_type,
                        std::vector<HeaderParam>& params) {
  const size_t semi = value.find(';');
  if (!iequals(trim_ows(value.substr(0, semi)), expected_type)) return false;
  return semi == std::string_view::npos || parse_header_params(value.substr(semi), params);
}

// The parameter `name` (lower case): nullptr when absent; sets `duplicate` when it occurs
// twice (two parsers could pick different ones, so that is an error).
const std::string* find_param(const std::vector<HeaderParam>& params, std::string_view name,
                              bool& duplicate) {
  const std::string* found = nullptr;
  for (const auto& p : params) {
    if (p.name != name) continue;
    if (found) duplicate = true;
    found = &p.value;
  }
  return found;
}

// What follows "--boundary" on a delimiter line.
struct DelimiterTail {
  bool close = false;  // "--boundary--": the last one
  size_t next = 0;     // index just past the line end (or the body's end for a close)
  std::string_view eol;
};

// Matches `--`? padding line-end at `i`. `eol` empty: either line end is accepted (the first
// delimiter decides the body's convention); otherwise that one only. A closing delimiter may
// also end the body without a line end.
std::optional<DelimiterTail> match_tail(std::string_view body, size_t i, std::string_view eol) {
  DelimiterTail tail;
  if (body.substr(i, 2) == "--") {
    tail.close = true;
    i += 2;
  }
  while (i < body.size() && is_ows(body[i])) ++i;
  if (i == body.size()) {
    if (!tail.close) return std::nullopt;  // truncated: the body ends on a delimiter
    tail.next = i;
    return tail;
  }
  const std::string_view rest = body.substr(i);
  for (std::string_view candidate : {std::string_view("\r\n"), std::string_view("\n")}) {
    if ((eol.empty() || eol == candidate) && rest.starts_with(candidate)) {
      tail.eol = candidate;
      tail.next = i + candidate.size();
      return tail;
    }
  }
  return std::nullopt;
}

// One part (what lies between two delimiter lines) → `out`.
ParseError parse_part(std::string_view part, std::string_view eol, const FormLimits& limits,
                      Form& out) {
  std::optional<std::string> name, filename, content_type;
  bool have_disposition = false;
  size_t header_count = 0;
  size_t pos = 0;
  std::string_view data;
  for (;;) {
    const std::string_view rest = part.substr(pos);
    if (rest.starts_with(eol)) {
      data = rest.substr(eol.size());
      break;
    }
    if (rest.empty()) break;  // headers and no body: an empty value
    const size_t end = rest.substr(0, kMaxHeaderLine + eol.size()).find(eol);
    if (end == std::string_view::npos || end > kMaxHeaderLine) return ParseError::kMalformed;
    if (++header_count > kMaxPartHeaders) return ParseError::kMalformed;
    const std::string_view line = rest.substr(0, end);
    pos += end + eol.size();

    for (const char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7F) return ParseError::kMalformed;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return ParseError::kMalformed;
    const std::string_view header = line.substr(0, colon);
    // Also rejects obsolete line folding (a line starting with a space).
    if (!std::all_of(header.begin(), header.end(), is_tchar)) return ParseError::kMalformed;
    const std::string_view value = trim_ows(line.substr(colon + 1));

    if (iequals(header, "Content-Disposition")) {
      if (have_disposition) return ParseError::kMalformed;
      have_disposition = true;
      std::vector<HeaderParam> params;
      if (!parse_typed_header(value, "form-data", params)) return ParseError::kMalformed;
      bool duplicate = false;
      const std::string* n = find_param(params, "name", duplicate);
      const std::string* f = find_param(params, "filename", duplicate);
      if (duplicate) return ParseError::kMalformed;
      if (n) name = *n;
      if (f) filename = *f;
    } else if (iequals(header, "Content-Type")) {
      if (content_type) return ParseError::kMalformed;
      content_type = std::string(value);
    }
    // Other headers (Content-Transfer-Encoding, deprecated by RFC 7578) are ignored.
  }

  if (!name) return ParseError::kMalformed;
  if (name->size() > limits.max_field_bytes) return ParseError::kTooLarge;
  if (filename) {
    if (filename->size() > limits.max_field_bytes || data.size() > limits.max_file_bytes) {
      return ParseError::kTooLarge;
    }
    // RFC 7578 section 4.4: a part without Content-Type is text/plain.
    out.files.push_back(FilePart{std::move(*name), std::move(*filename),
                                 content_type ? std::move(*content_type) : "text/plain",
                                 std::string(data)});
  } else {
    if (data.size() > limits.max_field_bytes) return ParseError::kTooLarge;
    out.fields.add(std::move(*name), std::string(data));
  }
  return ParseError::kNone;
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  std::vector<HeaderParam> params;
  if (!parse_typed_header(content_type, "multipart/form-data", params)) return std::nullopt;
  bool duplicate = false;
  const std::string* boundary = find_param(params, "boundary", duplicate);
  if (!boundary || duplicate || !valid_boundary(*boundary)) return std::nullopt;
  return *boundary;
}

// Layout (RFC 2046 section 5.1.1): [preamble EOL] "--b" tail EOL part (EOL "--b" tail EOL
// part)* EOL "--b--" [padding] [EOL epilogue]. The EOL before "--b" belongs to the
// delimiter, not to the part's data. Parts: header lines, an empty line, the data.
// `out` is only appended to when the whole body parses.
ParseError parse_multipart(std::string_view body, std::string_view boundary,
                           const FormLimits& limits, Form& out) {
  if (!valid_boundary(boundary)) return ParseError::kMalformed;
  const std::string dash = "--" + std::string(boundary);

  // The first delimiter line: at the very start, or after a preamble line.
  std::optional<DelimiterTail> tail;
  if (body.starts_with(dash)) tail = match_tail(body, dash.size(), {});
  const std::string lf_dash = "\n" + dash;
  for (size_t search = 0; !tail;) {
    const size_t at = body.find(lf_dash, search);
    if (at == std::string_view::npos) return ParseError::kMalformed;  // no boundary at all
    tail = match_tail(body, at + 1 + dash.size(), {});
    search = at + 1;
  }

  Form parsed;
  const std::string_view eol = tail->eol;
  const std::string delimiter = std::string(eol) + dash;
  while (!tail->close) {
    if (parsed.fields.size() + parsed.files.size() >= limits.max_fields) {
      return ParseError::kTooMany;
    }
    const size_t part_start = tail->next;
    size_t part_end = part_start;
    for (;;) {
      part_end = body.find(delimiter, part_end);
      // No closing delimiter: a truncated upload or a wrong boundary.
      if (part_end == std::string_view::npos) return ParseError::kMalformed;
      // A bare-LF body also takes CRLF delimiter lines, so that its parts never hold
      // anything a CRLF parser would split on.
      tail = match_tail(body, part_end + delimiter.size(), eol == "\n" ? "" : eol);
      if (tail) break;
      ++part_end;  // "--boundary" followed by other text is data
    }
    if (auto e = parse_part(body.substr(part_start, part_end - part_start), eol, limits, parsed);
        e != ParseError::kNone) {
      return e;
    }
  }

  for (const auto& [name, value] : parsed.fields.items()) out.fields.add(name, value);
  for (auto& file : parsed.files) out.files.push_back(std::move(file));
  return ParseError::kNone;
}

}  // namespace kagi::http
