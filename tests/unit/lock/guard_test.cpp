#include "lock/guard.hpp"

#include <gtest/gtest.h>

#include "service_fixture.hpp"

namespace kagi::lock {
namespace {

using GuardTest = testing::ServiceTest;

TEST_F(GuardTest, DefaultGuardHoldsNothing) {
  ExclusiveGuard g;
  EXPECT_FALSE(g.held());
  EXPECT_FALSE(g);
  EXPECT_EQ(g.name(), "");
  EXPECT_EQ(g.epoch(), 0u);
  EXPECT_EQ(g.verify(), Errc::kReleased);
  g.release();  // harmless
}

TEST_F(GuardTest, ReleaseOnScopeExitAndIdempotentRelease) {
  auto ctx = request("r");
  {
    SharedGuard g = ctx->shared("a/b");
    EXPECT_TRUE(g.held());
    EXPECT_EQ(g.name(), "a/b");
    EXPECT_EQ(g.mode(), Mode::kShared);
    EXPECT_FALSE(g.verify());
    EXPECT_EQ(service_->active_names(), 1u);
  }
  EXPECT_EQ(service_->active_names(), 0u);
  EXPECT_EQ(ctx->held_count(), 0u);
  ExclusiveGuard x = ctx->exclusive("a/b");
  x.release();
  x.release();
  EXPECT_FALSE(x.held());
  EXPECT_EQ(x.verify(), Errc::kReleased);
  EXPECT_EQ(service_->active_names(), 0u);
}

TEST_F(GuardTest, MovesTransferTheLock) {
  auto ctx = request("r");
  ExclusiveGuard a = ctx->exclusive("m");
  const uint64_t epoch = a.epoch();
  EXPECT_GT(epoch, 0u);
  ExclusiveGuard b = std::move(a);
  EXPECT_TRUE(b.held());
  EXPECT_EQ(b.epoch(), epoch);
  ExclusiveGuard c = ctx->exclusive("n");
  EXPECT_GT(c.epoch(), epoch);  // epochs tell grants apart
  c = std::move(b);             // c's own lock ("n") is released first
  EXPECT_EQ(c.name(), "m");
  EXPECT_EQ(ctx->held_count(), 1u);
}

TEST_F(GuardTest, GuardDoesNotOutliveItsRequest) {
  ExclusiveGuard kept;
  {
    auto ctx = request("r");
    kept = ctx->exclusive("k");
  }  // the context ends: the lock is released and counted as a leak
  EXPECT_FALSE(kept.held());
  EXPECT_EQ(kept.verify(), Errc::kReleased);
  EXPECT_EQ(service_->active_names(), 0u);
  EXPECT_EQ(service_->stats().total().leaks, 1u);
}

}  // namespace
}  // namespace kagi::lock
