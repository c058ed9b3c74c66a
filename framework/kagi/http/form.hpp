// http/form.hpp — parsers for what clients send: percent-encoding, query strings and
// application/x-www-form-urlencoded bodies, multipart/form-data bodies, Cookie headers.
//
// Every parser is bounded by FormLimits and never throws on bad input: it returns a
// ParseError that the pipeline turns into 400 (malformed) or 413 (too large). They are the
// fuzzed surface of kagi (tests/fuzz/).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/http/params.hpp>

namespace kagi::http {

struct FormLimits {
  size_t max_fields = 1000;             // limits.max_fields
  size_t max_field_bytes = 64 * 1024;   // limits.max_field_bytes: one decoded value (not files)
  size_t max_file_bytes = 1024 * 1024;  // one uploaded file (the body limit caps it anyway)
};

enum class ParseError {
  kNone = 0,
  kMalformed,  // broken encoding: bad %-escape, missing boundary, truncated part ... → 400
  kTooMany,    // more fields than max_fields → 413
  kTooLarge,   // a field or file over its limit → 413
};

// A short human-readable description ("malformed percent-encoding").
const char* describe(ParseError e);
// The HTTP status the pipeline answers for `e` (400 or 413; 200 for kNone).
int http_status(ParseError e);

// Decodes %XX escapes (and '+' as space when `plus_is_space`). nullopt on a bad escape.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);
// Encodes everything but unreserved characters (RFC 3986).
std::string percent_encode(std::string_view in);

// "a=1&b=2" → fields. Used for query strings and urlencoded bodies.
ParseError parse_urlencoded(std::string_view in, const FormLimits& limits, Params& out);

// The boundary parameter of a multipart/form-data Content-Type, or nullopt.
std::optional<std::string> multipart_boundary(std::string_view content_type);
// A multipart/form-data body → fields and files.
ParseError parse_multipart(std::string_view body, std::string_view boundary,
                           const FormLimits& limits, Form& out);

// "a=1; b=2" → cookies. Malformed pairs are skipped (browsers send junk); never fails
// except on more than max_fields cookies.
ParseError parse_cookies(std::string_view header, const FormLimits& limits, Params& out);

}  // namespace kagi::http
