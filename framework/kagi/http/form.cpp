// Error reporting for the form parsers, and the application/x-www-form-urlencoded parser
// (query strings and form bodies). Multipart and cookies live in multipart.cpp and
// cookies.cpp; percent-encoding in percent.cpp.
#include <kagi/http/form.hpp>

#include <vector>

namespace kagi::http {

const char* describe(ParseError e) {
  switch (e) {
    case ParseError::kNone:
      return "ok";
    case ParseError::kMalformed:
      return "malformed form data (bad percent-encoding, multipart framing or part headers)";
    case ParseError::kTooMany:
      return "too many form fields";
    case ParseError::kTooLarge:
      return "form field or uploaded file too large";
  }
  return "unknown form parse error";
}

int http_status(ParseError e) {
  switch (e) {
    case ParseError::kNone:
      return 200;
    case ParseError::kMalformed:
      return 400;
    case ParseError::kTooMany:
    case ParseError::kTooLarge:
      return 413;
  }
  return 400;
}

// The WHATWG URL Standard's urlencoded parser, made strict about escapes: pairs split on
// '&', empty pairs skipped, the first '=' splits name from value ("a" alone is name "a"
// with an empty value, "=v" is an empty name), '+' is a space. `out` is only appended to
// when the whole input parses, so a rejected request never carries half its fields.
ParseError parse_urlencoded(std::string_view in, const FormLimits& limits, Params& out) {
  std::vector<Params::Item> parsed;
  while (!in.empty()) {
    const size_t amp = in.find('&');
    const std::string_view pair = in.substr(0, amp);
    in = amp == std::string_view::npos ? std::string_view() : in.substr(amp + 1);
    if (pair.empty()) continue;
    if (parsed.size() >= limits.max_fields) return ParseError::kTooMany;

    const size_t eq = pair.find('=');
    const std::string_view raw_name = pair.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    // Decoding never grows the text, and shrinks it at most threefold: reject hopeless
    // sizes before spending memory on them.
    if (raw_name.size() / 3 > limits.max_field_bytes ||
        raw_value.size() / 3 > limits.max_field_bytes) {
      return ParseError::kTooLarge;
    }
    auto name = percent_decode(raw_name, /*plus_is_space=*/true);
    auto value = percent_decode(raw_value, /*plus_is_space=*/true);
    if (!name || !value) return ParseError::kMalformed;
    if (name->size() > limits.max_field_bytes || value->size() > limits.max_field_bytes) {
      return ParseError::kTooLarge;
    }
    parsed.emplace_back(std::move(*name), std::move(*value));
  }
  for (auto& [name, value] : parsed) out.add(std::move(name), std::move(value));
  return ParseError::kNone;
}

}  // namespace kagi::http
