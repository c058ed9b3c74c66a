// app/csrf.hpp — CSRF protection by a per-client token bound to the `kagi_csrf` cookie.
//
// The token is 32 random hex characters kept in an HttpOnly, SameSite=Lax cookie. Pages
// render it into forms (hidden field `_csrf`) and scripts send it in `X-CSRF-Token`. An
// unsafe request (POST, PUT, PATCH, DELETE) passes only if the submitted token equals the
// cookie's, compared in constant time: a third-party site can make the browser send the
// cookie, but cannot read it to put it into the form. The token is reusable for many posts
// (no per-form state on the server, so it works across processes and hosts).
#pragma once

#include <string>
#include <string_view>

#include "http/request.hpp"

namespace kagi::csrf {

inline constexpr std::string_view kCookie = "kagi_csrf";
inline constexpr std::string_view kField = "_csrf";
inline constexpr std::string_view kHeader = "X-CSRF-Token";

// True for methods that may change state and so must carry a token.
bool is_unsafe_method(std::string_view method);

// A cookie value that has the shape of a kagi token (32 lowercase hex characters).
bool well_formed(std::string_view token);

// A fresh token.
std::string new_token();

// The request's token from its cookie, or "" when it has none (or a malformed one).
std::string_view cookie_token(const http::Request& request);

// True when `request` submits (field _csrf or header X-CSRF-Token) a token equal to its
// cookie token. False when either is missing.
bool verify(const http::Request& request);

}  // namespace kagi::csrf
