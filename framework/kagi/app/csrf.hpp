// app/csrf.hpp — CSRF protection by a signed token bound to the CSRF cookie.
//
// A token is a random nonce and the HMAC of that nonce under the server secret
// (util/secret.hpp): 64 lowercase hex characters, kept in an HttpOnly, SameSite=Lax cookie.
// Pages render it into forms (hidden field `_csrf`) and scripts send it in `X-CSRF-Token`. An
// unsafe request (POST, PUT, PATCH, DELETE) passes only if its cookie holds a token this
// server signed AND the submitted token equals it, compared in constant time. A third-party
// site can make the browser send the cookie but cannot read it; and an attacker who can plant
// a cookie (a sibling subdomain, a plain-HTTP man in the middle) cannot make up a value that
// passes: an unsigned cookie is refused (403) and replaced by a fresh one.
//
// Over HTTPS the cookie is `__Host-kagi_csrf`: browsers accept a `__Host-` cookie only from
// the host itself over a secure connection, so no sibling subdomain and no plain-HTTP page can
// set it. Over plain HTTP it stays `kagi_csrf`. Tokens are reusable for many posts and need no
// per-form state on the server, so they work across processes and hosts sharing the secret.
#pragma once

#include <string>
#include <string_view>

#include <kagi/http/request.hpp>
#include <kagi/util/secret.hpp>

namespace kagi::csrf {

inline constexpr std::string_view kCookie = "kagi_csrf";
inline constexpr std::string_view kSecureCookie = "__Host-kagi_csrf";
inline constexpr std::string_view kField = "_csrf";
inline constexpr std::string_view kHeader = "X-CSRF-Token";

// The cookie's name for a request that came over HTTPS (`secure`) or plain HTTP.
inline std::string_view cookie_name(bool secure) { return secure ? kSecureCookie : kCookie; }

// True for methods that may change state and so must carry a token.
bool is_unsafe_method(std::string_view method);

// Has the shape of a kagi token (64 lowercase hex characters). Says nothing about who made it.
bool well_formed(std::string_view token);

// Makes and checks tokens under one server secret. Thread-safe (immutable).
class Tokens {
 public:
  explicit Tokens(util::Secret secret) : secret_(std::move(secret)) {}

  // A fresh signed token.
  std::string issue() const;
  // True when `token` is well formed and its signature is ours (constant-time compare).
  bool signed_by_us(std::string_view token) const;

  // The request's token from its cookie (`__Host-kagi_csrf` when `secure`, else
  // `kagi_csrf`), or "" when it has none, a malformed one or one this server did not sign.
  std::string_view cookie_token(const http::Request& request, bool secure) const;

  // True when the request's cookie token is ours and the request submits (field _csrf or
  // header X-CSRF-Token) the same token. False when either is missing.
  bool verify(const http::Request& request, bool secure) const;
  // verify() with the cookie token already looked up (cookie_token()): true when it is not
  // empty and the request submits the same token.
  bool submitted(const http::Request& request, std::string_view cookie_token) const;

 private:
  util::Secret secret_;
};

}  // namespace kagi::csrf
