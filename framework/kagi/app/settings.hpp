// app/settings.hpp — the config values the request path needs, read once at start so that
// serving a request does no config lookups (and where the finishing step counts requests).
#pragma once

#include <cstddef>
#include <string>

#include <kagi/config/config.hpp>
#include <kagi/http/form.hpp>

namespace kagi {

class RequestStats;

struct Limits {
  size_t max_body_bytes = 1024 * 1024;  // limits.max_body_bytes → 413
  size_t max_header_bytes = 16 * 1024;  // limits.max_header_bytes → 431 (HTTP front end)
  http::FormLimits form;                // limits.max_fields, limits.max_field_bytes

  static Limits from(const Config& conf);
};

namespace pipeline {

struct Settings {
  std::string csp;                   // security.csp
  bool access_log = true;            // log.access
  bool behind_https = false;         // server.behind_https
  RequestStats* requests = nullptr;  // counted by pipeline::finish(); set by App, not config

  static Settings from(const Config& conf);
};

}  // namespace pipeline
}  // namespace kagi
