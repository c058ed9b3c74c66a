// admin/access.hpp — who may see the admin routes: an allow-list of client addresses
// (admin.allow) and HTTP Basic against an htpasswd file of bcrypt entries (admin.htpasswd,
// made with `htpasswd -B`).
//
// Order of checks, so strangers cost nothing: no htpasswd configured → kOff (404, the routes
// do not exist); address not allowed → kForbidden (403, no password is ever checked for it);
// missing or wrong credentials → kUnauthorized (401 with WWW-Authenticate); else kAllowed.
// bcrypt takes tens of ms per check on purpose; no lock is held while verifying.
//
// Guessing is made slow and blind. Slow: an allowed address that fails kFreeFailures times
// must then wait before each further try (1 s, doubling up to kMaxBackoffS; check() throws
// HttpError 429 with Retry-After, before any hash), and a success clears it. Blind: an unknown
// user name is checked against a stand-in hash made with the scheme, cost and salt of the
// file's first entry, so it takes as long as a known user's wrong password. (Keep every entry
// at one cost, as `htpasswd -B -C N` does; a cheaper or dearer entry would stand out.)
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::apps::admin {

struct BasicCredentials {
  std::string user, password;
};

// The credentials of an `Authorization: Basic <base64>` header value; nullopt for any other
// scheme, bad or over-long base64 (more than 1024 characters), or a decoded text without ':'.
std::optional<BasicCredentials> parse_basic_auth(std::string_view header);

// Strict base64 (RFC 4648 alphabet, '=' padding required to a multiple of 4); nullopt on any
// other character.
std::optional<std::string> base64_decode(std::string_view text);

// Canonical form of a client address for the allow-list: "::ffff:127.0.0.1" (an IPv4 client
// on a dual-stack socket) becomes "127.0.0.1"; a bracketed "[::1]" becomes "::1".
std::string normalize_address(std::string_view address);

// The entries of an htpasswd file ("user:hash" lines; blank lines and '#' comments skipped).
std::map<std::string, std::string> parse_htpasswd(std::string_view text);

enum class Access { kOff, kForbidden, kUnauthorized, kAllowed };

// Per-address back-off after failed logins, in a bounded table. Thread-safe.
class LoginBackoff {
 public:
  // After `free_failures` failures the address waits 1 s before its next try; each further
  // failure doubles the wait (2 s, 4 s...), at most `max_wait_s`. At most `max_addresses` are
  // remembered: when full, the one whose wait ended longest ago is forgotten first.
  LoginBackoff(int free_failures, int64_t max_wait_s, size_t max_addresses);
  LoginBackoff(const LoginBackoff&) = delete;
  LoginBackoff& operator=(const LoginBackoff&) = delete;

  // Milliseconds `address` must still wait at `now_ms` (steady clock); 0: it may try now.
  // Kept in milliseconds: in whole seconds a failure late in a second would wait almost
  // nothing.
  int64_t wait_ms(const std::string& address, int64_t now_ms) const KAGI_EXCLUDES(mu_);
  void failed(const std::string& address, int64_t now_ms) KAGI_EXCLUDES(mu_);
  void succeeded(const std::string& address) KAGI_EXCLUDES(mu_);
  size_t size() const KAGI_EXCLUDES(mu_);

 private:
  struct Record {
    int failures = 0;
    int64_t until_ms = 0;  // no try before this
  };
  const int free_failures_;
  const int64_t max_wait_s_;
  const size_t max_addresses_;
  mutable util::Mutex mu_;
  std::map<std::string, Record> records_ KAGI_GUARDED_BY(mu_);
};

// Thread-safe. The htpasswd file is read again when its mtime or size changes, so an operator
// can add a user without restarting the workers.
class AdminAccess {
 public:
  AdminAccess(std::string htpasswd_path, std::vector<std::string> allow);
  AdminAccess(const AdminAccess&) = delete;
  AdminAccess& operator=(const AdminAccess&) = delete;

  static constexpr int kFreeFailures = 5;
  static constexpr int64_t kMaxBackoffS = 900;

  bool enabled() const { return !path_.empty(); }
  // Throws HttpError 429 (with Retry-After) while the address is backing off.
  Access check(std::string_view client_address,
               std::optional<std::string_view> authorization) const;

 private:
  // The hash stored for `user`, reloading the file if it changed; nullopt if unknown or the
  // file is unreadable. `stand_in` is set to the hash an unknown user is checked against.
  std::optional<std::string> hash_for(const std::string& user, std::string& stand_in) const
      KAGI_EXCLUDES(mu_);

  const std::string path_;
  std::vector<std::string> allow_;  // normalized; immutable after construction
  mutable util::Mutex mu_;
  mutable std::map<std::string, std::string> users_ KAGI_GUARDED_BY(mu_);
  mutable struct timespec mtime_ KAGI_GUARDED_BY(mu_) {};
  mutable off_t size_ KAGI_GUARDED_BY(mu_) = -1;
  mutable std::string stand_in_ KAGI_GUARDED_BY(mu_);
  mutable LoginBackoff backoff_{kFreeFailures, kMaxBackoffS, 4096};
};

}  // namespace kagi::apps::admin
