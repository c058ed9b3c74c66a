// util/secret.hpp — the server secret: 32 random bytes that key every tag kagi signs or
// blinds (CSRF tokens, the BBS's client tags), so that a value the server did not make
// cannot pass for one it did, and a tag cannot be turned back into what it was made from.
//
// One secret per site, in one file shared by every worker process of the host (a token made
// by one process must verify in another). The first process to start makes it from the
// kernel's CSPRNG and publishes it with link(2), which never overwrites: two processes
// starting at once both end up reading the one file that won. The file is 0600; a secret
// that others can read is refused, because anyone who can read it can forge tokens.
//
// Losing the file is harmless but visible: every CSRF cookie is replaced (one 403 per open
// form) and the BBS's flood and duplicate checks forget the old client tags.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <kagi/util/sha256.hpp>

namespace kagi::util {

class Secret {
 public:
  // Reads the secret at `path`, making it first if there is none. Throws std::runtime_error
  // (with the path and what to do) when it cannot be made or read, or is readable by others.
  static Secret load_or_create(const std::string& path);
  // A secret from given bytes (tests; must be 32 bytes).
  static Secret from_bytes(std::string_view bytes);

  // HMAC-SHA-256(secret, domain '\0' message), its first `bytes` bytes (≤ 32) as hex. The
  // domain ("csrf", "bbs-client") keeps tags made for one purpose useless for another.
  std::string tag(std::string_view domain, std::string_view message, size_t bytes) const;

 private:
  explicit Secret(const std::array<char, 32>& key) : hmac_({key.data(), key.size()}) {}
  HmacSha256 hmac_;  // keyed with the secret's 32 bytes
};

}  // namespace kagi::util
