#include <kagi/util/sha256.hpp>

#include <algorithm>

namespace kagi::util {
namespace {

constexpr std::array<uint32_t, 64> kRound{
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// The streaming state: enough for HMAC's two passes without concatenating strings.
class Sha256 {
 public:
  Sha256() = default;
  // Resumes a hash whose first `blocks` whole 64-byte blocks left the state `h` (see state()).
  Sha256(const std::array<uint32_t, 8>& h, uint64_t blocks) : h_(h), length_(blocks * 64) {}

  // The state after whole blocks only (nothing buffered): what a later Sha256 can resume from.
  const std::array<uint32_t, 8>& state() const { return h_; }

  void update(std::string_view data) {
    for (char c : data) {
      block_[used_++] = static_cast<unsigned char>(c);
      if (used_ == 64) {
        compress();
        used_ = 0;
      }
    }
    length_ += data.size();
  }

  Digest finish() {
    const uint64_t bits = length_ * 8;
    block_[used_++] = 0x80;
    if (used_ > 56) {
      std::fill(block_.begin() + static_cast<long>(used_), block_.end(), 0);
      compress();
      used_ = 0;
    }
    std::fill(block_.begin() + static_cast<long>(used_), block_.begin() + 56, 0);
    for (int i = 0; i < 8; ++i) block_[56 + i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    compress();
    Digest out;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 4; ++j)
        out[4 * i + j] = static_cast<unsigned char>(h_[i] >> (24 - 8 * j));
    }
    return out;
  }

 private:
  void compress() {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16) |
             (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                          kRound[static_cast<size_t>(i)] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  std::array<uint32_t, 8> h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  size_t used_ = 0;
  uint64_t length_ = 0;
};

std::string_view as_view(const Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

}  // namespace

Digest sha256(std::string_view data) {
  Sha256 s;
  s.update(data);
  return s.finish();
}

HmacSha256::HmacSha256(std::string_view key) {
  std::array<char, 64> block{};
  if (key.size() > block.size()) {
    const Digest k = sha256(key);
    std::copy(k.begin(), k.end(), block.begin());
  } else {
    std::copy(key.begin(), key.end(), block.begin());
  }
  std::array<char, 64> pad;
  for (size_t i = 0; i < 64; ++i) pad[i] = static_cast<char>(block[i] ^ 0x36);
  Sha256 inner;
  inner.update({pad.data(), pad.size()});
  inner_ = inner.state();
  for (size_t i = 0; i < 64; ++i) pad[i] = static_cast<char>(block[i] ^ 0x5c);
  Sha256 outer;
  outer.update({pad.data(), pad.size()});
  outer_ = outer.state();
}

Digest HmacSha256::sign(std::string_view message) const {
  Sha256 inner(inner_, 1);
  inner.update(message);
  const Digest inner_digest = inner.finish();
  Sha256 outer(outer_, 1);
  outer.update(as_view(inner_digest));
  return outer.finish();
}

Digest hmac_sha256(std::string_view key, std::string_view message) {
  return HmacSha256(key).sign(message);
}

std::string to_hex(const Digest& digest, size_t bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  bytes = std::min(bytes, digest.size());
  std::string out(bytes * 2, '0');
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace kagi::util
