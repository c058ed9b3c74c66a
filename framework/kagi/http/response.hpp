// http/response.hpp — what a handler answers. Front ends serialise it (FastCGI: a Status:
// header; HTTP: a status line); the pipeline adds security headers and cookie attributes.
#pragma once

#include <optional>
#include <string>
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

}  // namespace kagi::http
