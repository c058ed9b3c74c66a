// fcgi/cgi_params.hpp — translation between FastCGI (CGI/1.1 meta-variables, CGI response
// headers) and kagi's http::Request / http::Response. Pure functions: the server feeds
// them the params fcgi/protocol.hpp read, the unit tests feed them literals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/http/request.hpp>
#include <kagi/http/response.hpp>

namespace kagi::fcgi {

// The HTTP header a CGI param stands for: "HTTP_USER_AGENT" → "User-Agent",
// "CONTENT_TYPE" → "Content-Type", "CONTENT_LENGTH" → "Content-Length". Empty for params
// that are not headers (REQUEST_METHOD, HTTP_PROXY — see below — ...).
std::string header_name(std::string_view param);

// Fills method, target, headers, client_address and https of `request` from the request's
// FCGI_PARAMS as "NAME=value" strings, null-terminated. The target is REQUEST_URI (what
// nginx's stock fastcgi_params and Apache's mod_proxy_fcgi send); without it, it is rebuilt
// from SCRIPT_NAME + PATH_INFO + "?" QUERY_STRING. The body is left alone.
void fill_request(char* const* envp, http::Request& request);

// CONTENT_LENGTH as a number; nullopt when absent, empty or not a decimal number.
std::optional<uint64_t> content_length(const http::Request& request);

// The CGI response head: "Status: 404 Not Found\r\n", the headers, one Set-Cookie per
// cookie, Content-Length when the response has a body and no such header, then the empty line. A
// header whose name or value holds CR or LF is dropped (it would split the response).
std::string response_head(const http::Response& response);

}  // namespace kagi::fcgi
