#include <kagi/lock/mode.hpp>

#include <gtest/gtest.h>

namespace kagi::lock {
namespace {

TEST(ModeTest, Names) {
  EXPECT_EQ(to_string(Mode::kShared), "shared");
  EXPECT_EQ(to_string(Mode::kExclusive), "exclusive");
}

TEST(ModeTest, ErrorCodesSayWhatFailed) {
  std::error_code ec = Errc::kTimeout;
  EXPECT_EQ(ec.category().name(), std::string("kagi.lock"));
  EXPECT_NE(ec.message().find("timed out"), std::string::npos);
  EXPECT_TRUE(ec == Errc::kTimeout);
  EXPECT_FALSE(ec == Errc::kBackend);
  EXPECT_NE(std::error_code(Errc::kNameCollision).message().find("collision"), std::string::npos);
}

}  // namespace
}  // namespace kagi::lock
