// app/pipeline.hpp — the steps App::handle() runs around a handler, as small functions so
// each can be tested alone: target parsing, body parsing, response finishing.
#pragma once

#include <chrono>
#include <string>

#include <kagi/app/app.hpp>
#include <kagi/app/settings.hpp>
#include <kagi/http/request.hpp>
#include <kagi/http/response.hpp>

namespace kagi::pipeline {

// Splits request.target into path (percent-decoded) and query, then parses query parameters
// and cookies. Returns 0, or the error status (400 / 413 / 414) with `error` set.
int parse_head(http::Request& request, const Limits& limits, std::string& error);

// Parses an urlencoded or multipart body into request.form (other types are left raw).
// Returns 0, or 400 / 413 with `error` set.
int parse_body(http::Request& request, const Limits& limits, std::string& error);

// What finishing a response needs to remember about its request (it may finish later, on
// another thread, for a parked request).
struct FinishInfo {
  std::string request_id;
  std::string method;
  std::string target;
  std::string client_address;
  bool secure = false;         // add Secure to cookies
  std::string new_csrf_token;  // set the CSRF cookie (csrf::cookie_name) when non-empty
  std::string route;           // the matched route (request_stats.hpp); empty: none
  std::chrono::steady_clock::time_point started;
};

// Security headers, cookie attributes, X-Request-Id, HEAD bodies; then the access log line
// and the request statistics (settings.requests, when set).
void finish(http::Response& response, const FinishInfo& info, const Settings& settings);

}  // namespace kagi::pipeline
