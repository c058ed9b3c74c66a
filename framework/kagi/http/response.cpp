#include <kagi/http/response.hpp>

namespace kagi::http {

std::string to_set_cookie(const Cookie& cookie) {
  std::string out = cookie.name + "=" + cookie.value;
  if (!cookie.path.empty()) out += "; Path=" + cookie.path;
  if (cookie.max_age_s) out += "; Max-Age=" + std::to_string(*cookie.max_age_s);
  if (cookie.http_only) out += "; HttpOnly";
  if (!cookie.same_site.empty()) out += "; SameSite=" + cookie.same_site;
  if (cookie.secure) out += "; Secure";
  return out;
}

bool has_line_break(std::string_view text) {
  // Two memchr scans: find_first_of("\r\n") calls memchr once per byte of `text`.
  return text.find('\r') != text.npos || text.find('\n') != text.npos;
}

void append_fields(std::string& head, const Response& response, std::string_view skip_a,
                   std::string_view skip_b) {
  for (const auto& [name, value] : response.headers.items()) {
    if (name.empty() || has_line_break(name) || has_line_break(value)) continue;
    if ((!skip_a.empty() && iequals(name, skip_a)) || (!skip_b.empty() && iequals(name, skip_b))) {
      continue;
    }
    head.append(name).append(": ").append(value).append("\r\n");
  }
  for (const auto& cookie : response.cookies) {
    std::string line = to_set_cookie(cookie);
    if (!has_line_break(line)) head.append("Set-Cookie: ").append(line).append("\r\n");
  }
}

namespace {
Response with_type(std::string body, int status, const char* type) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", type);
  r.body = std::move(body);
  return r;
}
}  // namespace

Response Response::html(std::string body, int status) {
  return with_type(std::move(body), status, "text/html; charset=utf-8");
}
Response Response::json(std::string body, int status) {
  return with_type(std::move(body), status, "application/json");
}
Response Response::text(std::string body, int status) {
  return with_type(std::move(body), status, "text/plain; charset=utf-8");
}
Response Response::redirect(std::string location, int status) {
  Response r;
  r.status = status;
  r.headers.set("Location", std::move(location));
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown";
  }
}

}  // namespace kagi::http
