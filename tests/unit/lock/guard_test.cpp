#include <kagi/lock/guard.hpp>

#include <gtest/gtest.h>

#include <string>

#include <kagi/lock/lock_connection.hpp>

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

// Local locks live on no connection, and their epochs order nothing beyond the process: storage
// must neither try to commit "on the lock's connection" nor stamp their epochs.
TEST_F(GuardTest, ALocalGuardHasNoConnectionAndAnUnorderedEpoch) {
  auto ctx = request("r");
  ExclusiveGuard g = ctx->exclusive("a/local");
  EXPECT_FALSE(epoch_is_ordered(g.epoch()));
  bool ran = false;
  EXPECT_EQ(with_lock_connection(g,
                                 [&](pg::Connection&) {
                                   ran = true;
                                   return std::error_code();
                                 }),
            std::errc::operation_not_supported);
  EXPECT_FALSE(ran);
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

TEST_F(GuardTest, ARecycledLockRecordStartsClean) {
  // Released lock records are kept per thread and reused: each new guard must describe its
  // own lock only (name, mode, epoch, registry entry), never the previous one's.
  auto ctx = request("r");
  uint64_t last_epoch = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string name = "recycle/" + std::to_string(i % 5) + std::string(i % 3 * 20, 'x');
    const bool exclusive = i % 2 == 0;
    Guard g = exclusive ? Guard(ctx->exclusive(name)) : Guard(ctx->shared(name));
    EXPECT_TRUE(g.held());
    EXPECT_EQ(g.name(), name);
    EXPECT_EQ(g.mode(), exclusive ? Mode::kExclusive : Mode::kShared);
    EXPECT_GT(g.epoch(), last_epoch);
    last_epoch = g.epoch();
    RegistrySnapshot snap = service_->snapshot();
    ASSERT_EQ(snap.entries.size(), 1u);
    EXPECT_EQ(snap.entries[0].name, name);
    EXPECT_FALSE(snap.entries[0].waiting);
    if (i % 7 == 3) continue;  // left to the end of the loop body's scope
    g.release();
    EXPECT_TRUE(service_->snapshot().entries.empty());
  }
  EXPECT_EQ(ctx->held_count(), 0u);
  EXPECT_EQ(service_->active_names(), 0u);
  // A guard that outlived its request and is destroyed after a newer lock reused its record's
  // neighbours does not disturb the newer lock.
  ExclusiveGuard kept;
  {
    auto old_ctx = request("old");
    kept = old_ctx->exclusive("recycle/kept");
  }
  auto next = request("next");
  ExclusiveGuard fresh = next->exclusive("recycle/fresh");
  kept = ExclusiveGuard();
  EXPECT_TRUE(fresh.held());
  EXPECT_EQ(fresh.name(), "recycle/fresh");
  EXPECT_EQ(next->held_count(), 1u);
}

TEST_F(GuardTest, AFailedTryOnARecycledRecordLeavesOtherEntriesAlone) {
  auto a = request("a");
  auto b = request("b");
  auto c = request("c");
  ExclusiveGuard x = a->exclusive("recycle/x");  // registry slot 0
  {
    ExclusiveGuard y1 = b->exclusive("recycle/y1");  // slot 1
    ExclusiveGuard y2 = b->exclusive("recycle/y2");  // slot 2
    y1.release();                                    // spares: y1's record, then y2's on top
  }
  ExclusiveGuard z = c->exclusive("recycle/z");  // y2's record, and the lowest free slot: 1
  // Reuses y1's record (whose slot was 1), fails, and must unpublish nothing.
  EXPECT_FALSE(b->try_exclusive("recycle/x"));
  RegistrySnapshot snap = service_->snapshot();
  ASSERT_EQ(snap.entries.size(), 2u);
  EXPECT_TRUE(snap.entries[0].name == "recycle/z" || snap.entries[1].name == "recycle/z");
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
