#include <kagi/util/sha256.hpp>

#include <algorithm>
#include <cstring>

#include <kagi/util/detail/sha256_blocks.hpp>

namespace kagi::util {
namespace {

// The SHA extensions where the processor has them (a tenth of the time), picked at the first
// use (a static initializer elsewhere may already hash).
void compress_block(detail::Sha256State& h, const unsigned char* block) {
  static const auto chosen = detail::sha256_extensions_available()
                                 ? &detail::sha256_block_with_extensions
                                 : &detail::sha256_block_portable;
  chosen(h, block);
}

// The streaming state: enough for HMAC's two passes without concatenating strings.
class Sha256 {
 public:
  Sha256() = default;
  // Resumes a hash whose first `blocks` whole 64-byte blocks left the state `h` (see state()).
  Sha256(const std::array<uint32_t, 8>& h, uint64_t blocks) : h_(h), length_(blocks * 64) {}

  // The state after whole blocks only (nothing buffered): what a later Sha256 can resume from.
  const std::array<uint32_t, 8>& state() const { return h_; }

  void update(std::string_view data) {
    length_ += data.size();
    while (!data.empty()) {
      const size_t n = std::min(data.size(), block_.size() - used_);
      std::memcpy(block_.data() + used_, data.data(), n);
      used_ += n;
      data.remove_prefix(n);
      if (used_ == block_.size()) {
        compress();
        used_ = 0;
      }
    }
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
  void compress() { compress_block(h_, block_.data()); }

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
