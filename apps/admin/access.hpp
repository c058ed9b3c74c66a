// admin/access.hpp — who may see the admin routes: an allow-list of client addresses
// (admin.allow) and HTTP Basic against an htpasswd file of bcrypt entries (admin.htpasswd,
// made with `htpasswd -B`).
//
// Order of checks, so strangers cost nothing: no htpasswd configured → kOff (404, the routes
// do not exist); address not allowed → kForbidden (403, no password is ever checked for it);
// missing or wrong credentials → kUnauthorized (401 with WWW-Authenticate); else kAllowed.
// bcrypt takes tens of ms per check on purpose; no lock is held while verifying.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// Thread-safe. The htpasswd file is read again when its mtime or size changes, so an operator
// can add a user without restarting the workers.
class AdminAccess {
 public:
  AdminAccess(std::string htpasswd_path, std::vector<std::string> allow);
  AdminAccess(const AdminAccess&) = delete;
  AdminAccess& operator=(const AdminAccess&) = delete;

  bool enabled() const { return !path_.empty(); }
  Access check(std::string_view client_address,
               std::optional<std::string_view> authorization) const;

 private:
  // The hash stored for `user`, reloading the file if it changed; nullopt if unknown or the
  // file is unreadable.
  std::optional<std::string> hash_for(const std::string& user) const;

  const std::string path_;
  std::vector<std::string> allow_;  // normalized; immutable after construction
  mutable std::mutex mu_;
  mutable std::map<std::string, std::string> users_;  // guarded by mu_
  mutable struct timespec mtime_ {};                  // guarded by mu_
  mutable off_t size_ = -1;                           // guarded by mu_
};

}  // namespace kagi::apps::admin
