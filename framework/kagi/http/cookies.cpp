// The Cookie request header (RFC 6265 section 5.4 as browsers actually send it), parsed
// leniently the way servers must: junk pairs are skipped, never fatal.
#include <kagi/http/form.hpp>

#include <vector>

namespace kagi::http {
namespace {

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

// Pairs split on ';'; a pair without '=' or with an empty name is skipped; names and values
// are trimmed of spaces and tabs; a value in double quotes loses the quotes. Values are not
// percent-decoded: cookie encodings are the application's business. `out` is only
// appended to on success.
ParseError parse_cookies(std::string_view header, const FormLimits& limits, Params& out) {
  std::vector<Params::Item> parsed;
  while (!header.empty()) {
    const size_t semi = header.find(';');
    const std::string_view pair = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);

    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = trim_ows(pair.substr(0, eq));
    std::string_view value = trim_ows(pair.substr(eq + 1));
    if (name.empty()) continue;
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (parsed.size() >= limits.max_fields) return ParseError::kTooMany;
    parsed.emplace_back(name, value);
  }
  for (auto& [name, value] : parsed) out.add(std::move(name), std::move(value));
  return ParseError::kNone;
}

}  // namespace kagi::http
