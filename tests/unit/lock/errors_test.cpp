#include <kagi/lock/errors.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

TEST(ErrorsTest, CodesSayWhatFailed) {
  std::error_code ec = Errc::kTimeout;
  EXPECT_EQ(ec.category().name(), std::string("kagi.lock"));
  EXPECT_NE(ec.message().find("timed out"), std::string::npos);
  EXPECT_TRUE(ec == Errc::kTimeout);
  EXPECT_FALSE(ec == Errc::kBackend);
  EXPECT_NE(std::error_code(Errc::kNameCollision).message().find("collision"), std::string::npos);
}

TEST(ErrorsTest, ExceptionsNameTheLock) {
  LockBusy busy("bbs/board/3", 3000ms);
  EXPECT_EQ(busy.name(), "bbs/board/3");
  EXPECT_NE(std::string(busy.what()).find("3000 ms"), std::string::npos);
  LockNameError bad("Bad/Name", "upper case");
  EXPECT_NE(std::string(bad.what()).find("upper case"), std::string::npos);
  LockError failed(make_error_code(Errc::kBackend), "lock 'x': failed");
  EXPECT_EQ(failed.code(), Errc::kBackend);
}

}  // namespace
}  // namespace kagi::lock
