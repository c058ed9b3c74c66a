#include <kagi/store/log_cursor.hpp>

#include <gtest/gtest.h>

namespace kagi::store {
namespace {

// The header stands alone (included first, above) and its defaults mean "nothing seen yet".
TEST(LogCursorTest, DefaultsMeanNothingSeen) {
  LogCursor c;
  EXPECT_EQ(c.end, 0u);
  EXPECT_EQ(c.last_start, 0u);
  LogTail t;
  EXPECT_FALSE(t.restarted);
  EXPECT_TRUE(t.records.empty());
}

}  // namespace
}  // namespace kagi::store
