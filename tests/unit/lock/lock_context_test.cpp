#include <kagi/lock/lock_context.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <thread>
#include <type_traits>
#include <vector>

#include "service_fixture.hpp"

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;
using LockContextTest = testing::ServiceTest;

TEST_F(LockContextTest, TimeoutThrowsLockBusyNamingTheLock) {
  auto a = request("a");
  auto b = request("b");
  auto held = a->exclusive("bbs/board/3");
  const auto started = Clock::now();
  try {
    (void)b->exclusive("bbs/board/3", 50ms);
    FAIL() << "no LockBusy";
  } catch (const LockBusy& busy) {
    EXPECT_EQ(busy.name(), "bbs/board/3");
    EXPECT_GE(busy.waited(), 50ms);
    EXPECT_NE(std::string(busy.what()).find("bbs/board/3"), std::string::npos);
  }
  EXPECT_GE(Clock::now() - started, 50ms);
  EXPECT_LT(Clock::now() - started, 5s);
  EXPECT_EQ(b->held_count(), 0u);
  StatsSnapshot stats = service_->stats();
  EXPECT_EQ(stats.prefixes.at("bbs/board").timeouts, 1u);
  EXPECT_EQ(stats.prefixes.at("bbs/board").acquisitions, 1u);
}

TEST_F(LockContextTest, DefaultTimeoutComesFromTheOptions) {
  auto service = make_service(80ms);
  auto a = request("a", service.get());
  auto b = request("b", service.get());
  auto held = a->shared("x");
  const auto started = Clock::now();
  EXPECT_THROW((void)b->exclusive("x"), LockBusy);
  EXPECT_GE(Clock::now() - started, 80ms);
  EXPECT_LT(Clock::now() - started, 5s);
}

TEST_F(LockContextTest, TryVariantsNeverWait) {
  auto a = request("a");
  auto b = request("b");
  auto held = a->exclusive("t");
  EXPECT_FALSE(b->try_shared("t"));
  EXPECT_FALSE(b->try_exclusive("t"));
  held.release();
  auto s = b->try_shared("t");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->held());
  EXPECT_TRUE(a->try_shared("t"));  // readers share
}

TEST_F(LockContextTest, BadNamesAreRefusedWithAClearError) {
  auto ctx = request("r");
  try {
    (void)ctx->exclusive("bbs/../etc");
    FAIL() << "accepted '..'";
  } catch (const LockNameError& e) {
    EXPECT_NE(std::string(e.what()).find("'..'"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)ctx->shared(std::string("a\0b", 3)), LockNameError);
  EXPECT_THROW((void)ctx->shared(std::string(10 * 1024, 'a')), LockNameError);
  EXPECT_THROW((void)ctx->try_exclusive("/abs"), LockNameError);
  EXPECT_EQ(ctx->held_count(), 0u);
  EXPECT_EQ(service_->active_names(), 0u);
}

TEST_F(LockContextTest, OutOfOrderIsReportedAndCounted) {
  auto ctx = request("r");
  auto q = ctx->exclusive("app/q");
  auto p = ctx->exclusive("app/p");  // "app/p" < "app/q": a violation, reported, still granted
  EXPECT_TRUE(p.held());
  EXPECT_EQ(service_->stats().prefixes.at("app").order_violations, 1u);
  auto r = ctx->exclusive("app/r");  // in order: not a violation
  EXPECT_EQ(service_->stats().prefixes.at("app").order_violations, 1u);
}

TEST_F(LockContextTest, OutOfOrderFailsAtOnceInFailMode) {
  auto service = make_service(2000ms, /*order_fail=*/true);
  auto ctx = request("r", service.get());
  auto q = ctx->exclusive("q");
  try {
    (void)ctx->exclusive("p");
    FAIL() << "no LockOrderError";
  } catch (const LockOrderError& e) {
    EXPECT_EQ(e.code(), Errc::kOrderViolation);
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ctx->held_count(), 1u);
  EXPECT_EQ(service->stats().prefixes.at("p").order_violations, 1u);
}

TEST_F(LockContextTest, TakingAHeldNameAgainFailsInsteadOfWaitingOnItself) {
  auto ctx = request("r");
  auto a = ctx->shared("a");
  try {
    (void)ctx->exclusive("a", 10s);
    FAIL() << "no LockOrderError";
  } catch (const LockOrderError& e) {
    EXPECT_EQ(e.code(), Errc::kAlreadyHeld);
  }
  Guard g;
  EXPECT_EQ(ctx->try_acquire_for("a", Mode::kShared, 10s, g), Errc::kAlreadyHeld);
}

TEST_F(LockContextTest, SetIsCanonicalAndAllOrNothing) {
  auto other = request("other");
  auto blocker = other->exclusive("s/b");
  auto ctx = request("r");
  EXPECT_THROW((void)ctx->acquire(lock::shared("s/c"), lock::exclusive("s/b"), lock::shared("s/a")),
               LockBusy);
  EXPECT_THROW((void)ctx->exclusive_set({"s/c", "s/b", "s/a"}, 50ms), LockBusy);
  EXPECT_EQ(ctx->held_count(), 0u);
  EXPECT_TRUE(request("third")->try_exclusive("s/a"));  // released when "s/b" failed
  blocker.release();

  // Taken in canonical order (no order violation), handed back in the order asked, each
  // guard typed by its mode.
  auto [c, b, a] =
      ctx->acquire(lock::exclusive("s/c"), lock::exclusive("s/b"), lock::shared("s/a"));
  static_assert(std::is_same_v<decltype(a), SharedGuard>);
  static_assert(std::is_same_v<decltype(b), ExclusiveGuard>);
  EXPECT_EQ(a.name(), "s/a");
  EXPECT_EQ(a.mode(), Mode::kShared);
  EXPECT_EQ(b.name(), "s/b");
  EXPECT_EQ(c.name(), "s/c");
  EXPECT_EQ(c.mode(), Mode::kExclusive);
  EXPECT_EQ(ctx->held_count(), 3u);
  EXPECT_EQ(service_->stats().total().order_violations, 0u);
  a.release();
  b.release();
  c.release();
  EXPECT_EQ(ctx->held_count(), 0u);
  EXPECT_EQ(service_->active_names(), 0u);
}

TEST_F(LockContextTest, TypedSetsKeepTheOrderAsked) {
  auto ctx = request("r");
  {
    auto [second, first] = ctx->shared_set({"t/b", "t/a"});
    EXPECT_EQ(second.name(), "t/b");
    EXPECT_EQ(first.name(), "t/a");
    EXPECT_TRUE(second.held() && first.held());
  }
  {
    // An empty name leaves its place unlocked.
    auto [board, none] = ctx->exclusive_set({"t/board", ""});
    EXPECT_TRUE(board.held());
    EXPECT_FALSE(none.held());
    EXPECT_EQ(ctx->held_count(), 1u);
  }
  const std::vector<std::string> names{"t/z", "t/y", "t/x"};
  std::vector<SharedGuard> guards = ctx->shared_set(names);
  ASSERT_EQ(guards.size(), 3u);
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(guards[i].name(), names[i]);
  guards.clear();
  EXPECT_EQ(ctx->held_count(), 0u);
  EXPECT_EQ(service_->stats().total().order_violations, 0u);
}

TEST_F(LockContextTest, ANameListedTwiceInASetIsRefused) {
  auto ctx = request("r");
  EXPECT_THROW((void)ctx->exclusive_set({"d/a", "d/b", "d/a"}), LockOrderError);
  EXPECT_EQ(ctx->held_count(), 0u);  // all or nothing
  EXPECT_EQ(service_->active_names(), 0u);
}

TEST_F(LockContextTest, LeaksAreReleasedCountedAndReported) {
  auto ctx = request("r");
  ExclusiveGuard leaked = ctx->exclusive("chat/room/a");
  SharedGuard also = ctx->shared("chat/room/b");
  auto fine = ctx->shared("chat/room/c");
  fine.release();
  EXPECT_EQ(ctx->end_request(), 2u);
  EXPECT_FALSE(leaked.held());
  EXPECT_FALSE(also.held());
  EXPECT_EQ(service_->stats().prefixes.at("chat/room").leaks, 2u);
  EXPECT_EQ(service_->active_names(), 0u);
  EXPECT_EQ(ctx->end_request(), 0u);
  auto again = ctx->exclusive("chat/room/a");  // the context can serve on
  EXPECT_TRUE(again.held());
}

TEST_F(LockContextTest, ErrorValueFlavour) {
  auto a = request("a");
  auto b = request("b");
  ExclusiveGuard held;
  EXPECT_FALSE(a->try_acquire_for("e", Mode::kExclusive, 1s, held));
  EXPECT_TRUE(held.held());
  Guard g;
  EXPECT_EQ(b->try_acquire_for("e", Mode::kShared, 20ms, g), Errc::kTimeout);
  EXPECT_EQ(b->try_acquire_for("E", Mode::kShared, 20ms, g), Errc::kInvalidName);
  EXPECT_FALSE(g.held());
  held.release();
  EXPECT_FALSE(b->try_acquire_for("e", Mode::kShared, 20ms, g));
  EXPECT_TRUE(g.held());
}

// The seeds' trap: A locks P then Q while B locks Q then P. It must end within the timeout,
// both requests finishing, at least one with LockBusy, and the out-of-order take reported.
TEST_F(LockContextTest, PThenQAgainstQThenPEndsWithinTheTimeout) {
  std::barrier both_hold_first(2);
  std::atomic<int> busy{0}, done{0};
  auto run = [&](const char* first, const char* second, const char* id) {
    auto ctx = request(id);
    auto g1 = ctx->exclusive(first);
    both_hold_first.arrive_and_wait();
    try {
      auto g2 = ctx->exclusive(second, 200ms);
    } catch (const LockBusy&) {
      ++busy;
    }
    ++done;
  };
  const auto started = Clock::now();
  std::thread a(run, "p", "q", "A");
  std::thread b(run, "q", "p", "B");
  a.join();
  b.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_GE(busy.load(), 1);
  EXPECT_LT(Clock::now() - started, 5s);
  EXPECT_EQ(service_->stats().total().order_violations, 1u);  // B took "p" after "q"
  EXPECT_EQ(service_->active_names(), 0u);
}

// Lost updates cannot happen through the lock: many threads, one context each per increment.
// The critical section reads, sleeps, then writes back: without exclusion the threads would
// sleep side by side on the same value and lose most of their updates, not one in a million.
TEST_F(LockContextTest, ExclusiveCounterIsExact) {
  constexpr int kThreads = 4;
  constexpr int kIncrements = 300;
  int counter = 0;  // guarded by the lock "counter"
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrements; ++i) {
        auto ctx = request("t" + std::to_string(t));
        auto g = ctx->exclusive("counter");
        const int seen = counter;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        counter = seen + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, kThreads * kIncrements);
  EXPECT_EQ(service_->stats().total().acquisitions, uint64_t{kThreads * kIncrements});
}

}  // namespace
}  // namespace kagi::lock
