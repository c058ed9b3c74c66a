#include <kagi/store/detail/crc32c.hpp>

#include <array>
#include <cstring>

namespace kagi::store::detail {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr auto kTable = make_table();

// Runs on `crc` already inverted (the caller inverts before and after).
uint32_t crc32c_table(uint32_t crc, std::string_view data) {
  for (unsigned char b : data) crc = kTable[(crc ^ b) & 0xFFu] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// SSE 4.2 has an instruction for exactly this polynomial: 8 bytes per step.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, std::string_view data) {
  const char* p = data.data();
  size_t n = data.size();
  uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = __builtin_ia32_crc32qi(c32, static_cast<unsigned char>(*p));
  return c32;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, std::string_view data) {
#if defined(__x86_64__)
  if (kHaveSse42) return ~crc32c_sse42(~crc, data);
#endif
  return ~crc32c_table(~crc, data);
}

uint32_t crc32c_portable(uint32_t crc, std::string_view data) { return ~crc32c_table(~crc, data); }

}  // namespace kagi::store::detail
