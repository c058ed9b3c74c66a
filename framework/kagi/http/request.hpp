// http/request.hpp — one HTTP request, as both front ends (FastCGI and HTTP) hand it to the
// application. The front end fills the raw fields; the pipeline parses the rest (cookies,
// query, form) under the configured limits before any handler runs.
#pragma once

#include <string>
#include <string_view>

#include <kagi/http/headers.hpp>
#include <kagi/http/params.hpp>

namespace kagi::http {

struct Request {
  // Filled by the front end.
  std::string method;          // "GET", "POST", ...
  std::string target;          // the request target as sent: "/bbs/general/?page=2"
  Headers headers;             // request headers (names case-insensitive)
  std::string client_address;  // peer address (through nginx: REMOTE_ADDR)
  bool https = false;          // the client reached us over TLS (HTTPS=on behind a proxy)
  std::string body;            // the whole body; front ends enforce limits.max_body_bytes

  // Filled by the pipeline before routing.
  std::string path;     // percent-decoded path of `target`, without the query
  std::string query;    // raw query string (after '?'), still encoded
  Params query_params;  // decoded query parameters
  Params cookies;       // from the Cookie header
  Form form;            // parsed urlencoded or multipart body (unsafe methods only)
  Params path_params;   // from the matched route pattern ("/bbs/{board}/")

  // Shorthands. param(): a path parameter; field(): a form field; arg(): a query parameter.
  std::string_view param(std::string_view name) const { return path_params.value_or(name, ""); }
  std::string_view field(std::string_view name) const { return form.fields.value_or(name, ""); }
  std::string_view arg(std::string_view name) const { return query_params.value_or(name, ""); }
};

}  // namespace kagi::http
