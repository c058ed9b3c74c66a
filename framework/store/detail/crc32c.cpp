#include "store/detail/crc32c.hpp"

#include <array>

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

}  // namespace

uint32_t crc32c(uint32_t crc, std::string_view data) {
  crc = ~crc;
  for (unsigned char b : data) crc = kTable[(crc ^ b) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace kagi::store::detail
