#include <kagi/store/detail/crc32c.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kagi::store::detail {
namespace {

TEST(Crc32cTest, KnownVector) {
  // The standard check value of CRC-32C.
  EXPECT_EQ(crc32c(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(crc32c(0, "1234"), "56789"), 0xE3069283u);
}

TEST(Crc32cTest, HardwareAndTableAgreeOnEveryLengthAndSplit) {
  // Lengths around the 8-byte steps, odd starts, and chaining at every split point.
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  EXPECT_EQ(crc32c_portable(0, "123456789"), 0xE3069283u);
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= data.size(); len += 7) {
      std::string_view piece = std::string_view(data).substr(start, len);
      ASSERT_EQ(crc32c(0, piece), crc32c_portable(0, piece)) << start << "+" << len;
    }
  }
  for (size_t split = 0; split <= 40; ++split) {
    std::string_view all = std::string_view(data).substr(0, 40);
    EXPECT_EQ(crc32c(crc32c(0, all.substr(0, split)), all.substr(split)), crc32c_portable(0, all));
  }
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  const std::string data = "KAGILOG1 a record";
  const uint32_t good = crc32c(0, data);
  for (size_t i = 0; i < data.size() * 8; ++i) {
    std::string bad = data;
    bad[i / 8] = static_cast<char>(bad[i / 8] ^ (1 << (i % 8)));
    EXPECT_NE(crc32c(0, bad), good) << "bit " << i;
  }
}

}  // namespace
}  // namespace kagi::store::detail
