#include "bbs/throttle.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kagi::apps::bbs {
namespace {

TEST(AttemptLimiter, AllowsTheLimitThenSaysHowLongToWait) {
  AttemptLimiter limiter(3, 60, 100);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.try_attempt("k", 1000), 0) << i;
  EXPECT_EQ(limiter.try_attempt("k", 1000), 60);
  EXPECT_EQ(limiter.try_attempt("k", 1045), 15);
  EXPECT_EQ(limiter.try_attempt("other", 1045), 0) << "keys are counted apart";
  EXPECT_EQ(limiter.try_attempt("k", 1060), 0) << "a new window";
}

TEST(AttemptLimiter, ZeroMeansNoLimit) {
  AttemptLimiter limiter(0, 60, 10);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.try_attempt("k", 1), 0);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(AttemptLimiter, TheTableStaysBounded) {
  AttemptLimiter limiter(1, 60, 8);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(limiter.try_attempt("client" + std::to_string(i), 1000 + i / 100), 0);
    EXPECT_LE(limiter.size(), 8u);
  }
  // The newest keys are still counted: an attacker cycling keys cannot reset a recent one.
  EXPECT_GT(limiter.try_attempt("client999", 1009), 0);
}

TEST(AttemptLimiter, ExpiredWindowsGoFirst) {
  AttemptLimiter limiter(1, 60, 2);
  EXPECT_EQ(limiter.try_attempt("old", 0), 0);
  EXPECT_EQ(limiter.try_attempt("live", 50), 0);
  EXPECT_EQ(limiter.try_attempt("new", 70), 0);  // "old" expired: dropped, not "live"
  EXPECT_GT(limiter.try_attempt("live", 70), 0);
}

}  // namespace
}  // namespace kagi::apps::bbs
