#include <kagi/util/random.hpp>

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include <kagi/util/process.hpp>

namespace kagi::util {
namespace {

void fill_from_kernel(unsigned char* out, size_t size) {
  size_t filled = 0;
  while (filled < size) {
    ssize_t n = getrandom(out + filled, size - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("getrandom failed: the kernel CSPRNG is unavailable");
    }
    filled += static_cast<size_t>(n);
  }
}

// Kernel randomness fetched 512 bytes at a time per thread: a CSRF token per cookieless
// request would otherwise cost a system call each. Each byte is handed out once and wiped;
// a buffer inherited through fork() is dropped (the child would repeat its parent's tokens).
struct RandomBuffer {
  uint64_t generation = 0;
  size_t used = sizeof bytes;
  unsigned char bytes[512];

  void take(unsigned char* out, size_t size) {
    if (generation != fork_generation()) {
      generation = fork_generation();
      used = sizeof bytes;
    }
    while (size > 0) {
      if (used == sizeof bytes) {
        fill_from_kernel(bytes, sizeof bytes);
        used = 0;
      }
      const size_t n = std::min(size, sizeof bytes - used);
      std::memcpy(out, bytes + used, n);
      std::memset(bytes + used, 0, n);
      used += n;
      out += n;
      size -= n;
    }
  }
};
thread_local RandomBuffer t_random;

}  // namespace

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  t_random.take(reinterpret_cast<unsigned char*>(raw.data()), bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes * 2, '0');
  for (size_t i = 0; i < bytes; ++i) {
    auto b = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 0xf];
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // The length is not secret (tokens have a fixed length); the content is.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace kagi::util
