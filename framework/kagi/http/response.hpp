// http/response.hpp — what a handler answers. Front ends serialise it (FastCGI: a Status:
// header; HTTP: a status line); the pipeline adds security headers and cookie attributes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/http/headers.hpp>

namespace kagi::http {

struct Cookie {
  std::string name;
  std::string value;
  std::string path = "/";
  std::optional<long> max_age_s;  // nullopt: a session cookie
  bool http_only = true;
  std::string same_site = "Lax";
  bool secure = false;  // the pipeline sets it when the request came over https
};

// "name=value; Path=/; HttpOnly; SameSite=Lax[; Secure][; Max-Age=N]"
std::string to_set_cookie(const Cookie& cookie);

struct Response {
  int status = 200;
  Headers headers;
  std::vector<Cookie> cookies;
  std::string body;

  static Response html(std::string body, int status = 200);
  static Response json(std::string body, int status = 200);
  static Response text(std::string body, int status = 200);
  // 303 See Other by default: the answer to a successful POST.
  static Response redirect(std::string location, int status = 303);
};

// The reason phrase for a status code ("Not Found"), or "Unknown".
const char* reason_phrase(int status);

// True when `text` holds a CR or an LF: as a header name or value it would end the line early
// and start one of the sender's choosing (header injection).
bool has_line_break(std::string_view text);

// Appends the response's header fields, then its cookies (Set-Cookie), to a response head, one
// "Name: value\r\n" line each, as both front ends send them. Left out: a field with an empty
// name, any field or cookie holding a line break, and fields named `skip_a` or `skip_b`
// (case-insensitive; empty: none), which the front end writes itself.
void append_fields(std::string& head, const Response& response, std::string_view skip_a = {},
                   std::string_view skip_b = {});

}  // namespace kagi::http
