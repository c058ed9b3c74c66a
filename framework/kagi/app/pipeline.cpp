#include <kagi/app/pipeline.hpp>

#include <kagi/app/csrf.hpp>
#include <kagi/app/request_stats.hpp>
#include <kagi/http/form.hpp>
#include <kagi/util/log.hpp>

namespace kagi::pipeline {

int parse_head(http::Request& request, const Limits& limits, std::string& error) {
  std::string_view target = request.target;
  size_t question = target.find('?');
  std::string_view raw_path = target.substr(0, question);
  if (raw_path.empty() || raw_path.front() != '/') {
    error = "the request target must start with '/'";
    return 400;
  }
  auto path = http::percent_decode(raw_path, /*plus_is_space=*/false);
  if (!path) {
    error = "the request path has a broken %-escape";
    return 400;
  }
  if (path->find('\0') != std::string::npos) {
    error = "the request path contains a NUL byte";
    return 400;
  }
  request.path = std::move(*path);
  request.query =
      question == std::string_view::npos ? "" : std::string(target.substr(question + 1));
  if (auto e = http::parse_urlencoded(request.query, limits.form, request.query_params);
      e != http::ParseError::kNone) {
    error = std::string("query string: ") + http::describe(e);
    return http::http_status(e);
  }
  if (auto cookie = request.headers.get("Cookie")) {
    if (auto e = http::parse_cookies(*cookie, limits.form, request.cookies);
        e != http::ParseError::kNone) {
      error = std::string("cookies: ") + http::describe(e);
      return http::http_status(e);
    }
  }
  return 0;
}

int parse_body(http::Request& request, const Limits& limits, std::string& error) {
  if (request.body.size() > limits.max_body_bytes) {
    error = "the request body is larger than " + std::to_string(limits.max_body_bytes) + " bytes";
    return 413;
  }
  std::string_view type = request.headers.get("Content-Type").value_or("");
  http::ParseError e = http::ParseError::kNone;
  if (type.starts_with("application/x-www-form-urlencoded")) {
    e = http::parse_urlencoded(request.body, limits.form, request.form.fields);
  } else if (type.starts_with("multipart/form-data")) {
    auto boundary = http::multipart_boundary(type);
    if (!boundary) {
      error = "multipart body without a boundary";
      return 400;
    }
    e = http::parse_multipart(request.body, *boundary, limits.form, request.form);
  }
  if (e != http::ParseError::kNone) {
    error = std::string("request body: ") + http::describe(e);
    return http::http_status(e);
  }
  return 0;
}

}  // namespace kagi::pipeline

namespace kagi {

Limits Limits::from(const Config& conf) {
  Limits limits;
  limits.max_body_bytes = static_cast<size_t>(conf.get_int("limits.max_body_bytes"));
  limits.max_header_bytes = static_cast<size_t>(conf.get_int("limits.max_header_bytes"));
  limits.form.max_fields = static_cast<size_t>(conf.get_int("limits.max_fields"));
  limits.form.max_field_bytes = static_cast<size_t>(conf.get_int("limits.max_field_bytes"));
  limits.form.max_file_bytes = limits.max_body_bytes;
  return limits;
}

}  // namespace kagi

namespace kagi::pipeline {

Settings Settings::from(const Config& conf) {
  return Settings{.csp = conf.get_string("security.csp"),
                  .access_log = conf.get_bool("log.access"),
                  .behind_https = conf.get_bool("server.behind_https")};
}

void finish(http::Response& response, const FinishInfo& info, const Settings& settings) {
  auto& h = response.headers;
  h.reserve(h.size() + 5);
  if (!h.has("Content-Security-Policy")) h.set("Content-Security-Policy", settings.csp);
  h.set("X-Content-Type-Options", "nosniff");
  h.set("X-Frame-Options", "DENY");
  h.set("Referrer-Policy", "same-origin");
  h.set("X-Request-Id", info.request_id);
  if (!info.new_csrf_token.empty()) {
    http::Cookie cookie;
    cookie.name = csrf::cookie_name(info.secure);  // __Host- needs Secure: same condition
    cookie.value = info.new_csrf_token;
    response.cookies.push_back(std::move(cookie));
  }
  for (auto& cookie : response.cookies) cookie.secure = cookie.secure || info.secure;
  if (info.method == "HEAD") {
    // The length of the GET answer, without its body.
    if (!h.has("Content-Length")) h.set("Content-Length", std::to_string(response.body.size()));
    response.body.clear();
  }

  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - info.started);
  if (settings.requests) {
    settings.requests->record(info.route.empty() ? kNoRoute : std::string_view(info.route),
                              response.status, took);
  }
  if (settings.access_log) {
    util::log_info("access " + info.client_address + " \"" + info.method + " " + info.target +
                   "\" " + std::to_string(response.status) + " " +
                   std::to_string(response.body.size()) + " " +
                   std::to_string(took.count() / 1000.0) + "ms id=" + info.request_id);
  }
}

}  // namespace kagi::pipeline
