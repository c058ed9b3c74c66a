// app/session.hpp — ctx.session: the request's server-side session (offline/session_store.hpp),
// the owner of its offline locks.
//
//   if (ctx.session.exists()) { ... ctx.session.owner() ... }   // looks, creates nothing
//   ctx.session.rotate();            // after a privilege change: a new id, same session
//   ctx.session.set_name("alice");   // creates the session if there is none
//
// A session is created on first use (owner(), set_name(), rotate()), never for a mere visit.
// Its id travels in the cookie `kagi_session` (HttpOnly, SameSite=Lax, Secure when the site is
// served over https: server.behind_https); the pipeline sets it on the response when the
// session was created or given a new id, and clears it when the session ended. A request the
// handler parks (ctx.defer()) sends no session cookie: create sessions in ordinary requests.
//
// Store failures throw store::StoreError (the pipeline answers 503 when the store cannot be
// reached). Used by one request's thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <kagi/http/request.hpp>
#include <kagi/http/response.hpp>
#include <kagi/offline/session_store.hpp>

namespace kagi {

class Session {
 public:
  static constexpr std::string_view kCookie = "kagi_session";

  Session(offline::SessionStore& store, const http::Request& request);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // True if the request came with the cookie of a live session (or this request made one).
  // The store is asked once per request, and only if the request has the cookie.
  bool exists();
  // The session's owner id (what its offline locks are held by); creates the session first if
  // there is none.
  const std::string& owner();
  // The display name the app gave it ("" if none, or no session).
  std::string name();
  void set_name(std::string_view name);
  // Gives the session a new id and cookie (creating it if there is none): the id an attacker
  // may have planted before a privilege change (session fixation) stops working.
  void rotate();
  // Ends the session (its cookie is cleared). Returns the owner id it had ("" if none), so the
  // app can release its offline locks.
  std::string end();

  // The Set-Cookie the response needs, if any (for the pipeline).
  std::optional<http::Cookie> cookie() const;

 private:
  void load();
  void create();

  offline::SessionStore& store_;
  std::string id_;  // from the cookie, or made by this request
  bool loaded_ = false;
  std::optional<offline::SessionRecord> record_;
  enum class CookieChange { kNone, kSet, kClear } change_ = CookieChange::kNone;
};

}  // namespace kagi
