// util/sha256.hpp — SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for keyed tags: signed
// CSRF tokens and the BBS's client tags. kagi links no crypto library, and these two
// functions are all it needs; they are checked against the FIPS and RFC 4231 test vectors.
// Blocks are hashed with the x86 SHA extensions where the processor has them
// (util/detail/sha256_blocks.hpp).
//
// Not for passwords (util/password.hpp is deliberately slow; these are fast).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kagi::util {

using Digest = std::array<unsigned char, 32>;

// SHA-256 of `data`.
Digest sha256(std::string_view data);

// HMAC-SHA-256 of `message` under `key` (any length; keys over 64 bytes are hashed first).
Digest hmac_sha256(std::string_view key, std::string_view message);

// HMAC-SHA-256 under one key, kept: the key's two padded blocks are hashed once, here, so each
// sign() hashes only the message and the inner digest (two compressions for a short message
// where hmac_sha256 makes four). Same results as hmac_sha256(key, message).
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key);
  Digest sign(std::string_view message) const;

 private:
  std::array<uint32_t, 8> inner_{};  // SHA-256 state after key ^ ipad
  std::array<uint32_t, 8> outer_{};  // SHA-256 state after key ^ opad
};

// The first `bytes` bytes of `digest` (at most 32) as lowercase hex.
std::string to_hex(const Digest& digest, size_t bytes = 32);

}  // namespace kagi::util
