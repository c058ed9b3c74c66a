#include <kagi/lock/mode.hpp>

#include <gtest/gtest.h>

namespace kagi::lock {
namespace {

TEST(ModeTest, Names) {
  EXPECT_EQ(to_string(Mode::kShared), "shared");
  EXPECT_EQ(to_string(Mode::kExclusive), "exclusive");
}

}  // namespace
}  // namespace kagi::lock
