#include "store/detail/crc32c.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kagi::store::detail {
namespace {

TEST(Crc32cTest, KnownVector) {
  // The standard check value of CRC-32C.
  EXPECT_EQ(crc32c(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(crc32c(0, "1234"), "56789"), 0xE3069283u);
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
