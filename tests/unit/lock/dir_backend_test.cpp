// The dir backend as a LockService runs it (lock/detail/dir_backend.cpp): the process's shared
// reader record, the heartbeat's cadence and clock, seen from another "host" that looks at the
// shared folder with the protocol alone (lock/detail/dir_lock.hpp).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <kagi/lock/detail/dir_lock.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_service.hpp>
#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

class DirBackendTest : public ::testing::Test {
 protected:
  LockOptions options(const std::string& host, std::chrono::milliseconds lease = 10s) {
    LockOptions o;
    o.backend = "dir";
    o.dir = dir_.path() + "/shared";
    o.dir_host_id = host;
    o.dir_lease = lease;
    o.timeout = 300ms;
    o.registry = false;
    return o;
  }
  // Another host, seen only through the protocol (no heartbeat, no table).
  dirlock::DirLocks other(const std::string& host) {
    return dirlock::DirLocks(
        {.root = dir_.path() + "/shared/dirlocks", .host = host, .lease = 10s, .max_skew = 30s});
  }
  static HolderInfo who(const std::string& id) { return {id, "GET", "/r/" + id, "192.0.2.9"}; }
  // Watches `name`'s record from another host for `span`: the longest time its name stayed
  // the same (what a contender's rule 1 measures), and how often it changed.
  struct Watch {
    std::chrono::milliseconds longest_unchanged{0};
    int changes = 0;
  };
  Watch watch(const std::string& name, std::chrono::milliseconds span) {
    auto b = other("watcher");
    Watch w;
    std::string last;
    auto since = std::chrono::steady_clock::now();
    const auto end = since + span;
    for (auto now = since; now < end; now = std::chrono::steady_clock::now()) {
      const auto entries = b.entries(name);
      const std::string file = entries.empty() ? "" : entries[0].file;
      if (file != last) {
        if (!last.empty()) ++w.changes;
        last = file;
        since = now;
      }
      w.longest_unchanged = std::max(
          w.longest_unchanged, std::chrono::duration_cast<std::chrono::milliseconds>(now - since));
      std::this_thread::sleep_for(2ms);
    }
    return w;
  }
  test_support::TempDir dir_;
};

// A process's readers share one reader record. Once that record was taken over (here: removed
// as stale by another host, which then takes the name exclusively), the guards that joined it
// are fenced, and a new reader of the process must not join it again: it waits for the
// exclusive holder like any reader.
TEST_F(DirBackendTest, ALostReaderRecordIsNeverJoinedAgain) {
  auto service = LockService::create(options("a"));
  auto ctx1 = service->context(who("r1"));
  auto r1 = ctx1->shared("t/s");
  auto b = other("b");
  const auto seen = b.entries("t/s");
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_TRUE(b.remove_stale("t/s", seen[0]));  // taken over
  dirlock::Hold bx;
  ASSERT_FALSE(b.try_lock("t/s", Mode::kExclusive, who("b"), true, bx, nullptr));
  EXPECT_EQ(r1.verify(), Errc::kFenceLost);  // the reader learns it lost the name

  auto ctx2 = service->context(who("r2"));
  EXPECT_FALSE(ctx2->try_shared("t/s").has_value()) << "joined a record that was taken over";
  auto ctx3 = service->context(who("r3"));
  EXPECT_THROW(ctx3->shared("t/s", 50ms), LockBusy);

  // Once the writer is gone a reader takes a record of its own, which the old guard's release
  // leaves alone.
  b.release(bx);
  auto ctx4 = service->context(who("r4"));
  auto r4 = ctx4->try_shared("t/s");
  ASSERT_TRUE(r4.has_value());
  r1.release();
  EXPECT_FALSE(r4->verify());
  const auto now = b.entries("t/s");
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0].nonce, seen[0].nonce);
}

// A file in a lock directory that is not an owner record (damaged, another program's) would
// make every rename onto the directory fail for ever: it is removed once unchanged for the
// lease plus the skew margin, and the lock is taken.
TEST_F(DirBackendTest, AForeignEntryDoesNotWedgeTheLock) {
  auto o = options("a", 200ms);
  o.dir_max_clock_skew = 100ms;
  o.timeout = 3s;
  auto service = LockService::create(o);
  const std::string dir = other("b").lock_dir("t/junk");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::symlink("?", (dir + "/junk").c_str()), 0);
  auto ctx = service->context(who("x"));
  const auto start = std::chrono::steady_clock::now();
  auto g = ctx->exclusive("t/junk");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);  // not before lease + margin
  EXPECT_FALSE(g.verify());
}

// The heartbeat renews a held record at most a third of the lease after its last renewal, so a
// holder that misses a beat or two (a slow file server, a busy host) still renews long before a
// contender may call its record stale (a whole lease unchanged).
TEST_F(DirBackendTest, TheHeartbeatRenewsWithinAThirdOfTheLease) {
  constexpr auto kLease = 600ms;
  auto service = LockService::create(options("a", kLease));
  // Watched from before the record exists, and taken out of step with the heartbeat's beats
  // (which started with the service): the first renewal counts too.
  Watch w;
  std::thread watcher([&] { w = watch("t/beat", 2000ms); });
  std::this_thread::sleep_for(kLease / 3 + 20ms);
  auto ctx = service->context(who("x"));
  auto g = ctx->exclusive("t/beat");
  watcher.join();
  std::printf("  lease %lld ms: %d renewals in 2 s, longest unchanged %lld ms\n",
              static_cast<long long>(kLease.count()), w.changes,
              static_cast<long long>(w.longest_unchanged.count()));
  EXPECT_LE(w.longest_unchanged, kLease / 3 + 60ms);
  EXPECT_FALSE(g.verify());
}

// The heartbeat's cadence is on the steady clock: a wall clock stepped back an hour (NTP, an
// operator) does not stop the renewals, which would make every contender's rule 1 take the lock.
TEST_F(DirBackendTest, AWallClockStepDoesNotStopTheRenewals) {
  constexpr auto kLease = 600ms;
  auto service = LockService::create(options("a", kLease));
  auto ctx = service->context(who("x"));
  auto g = ctx->exclusive("t/step");
  dirlock::shift_wall_clock_for_tests(-3600 * 1000);
  const Watch w = watch("t/step", 1500ms);
  dirlock::shift_wall_clock_for_tests(0);
  std::printf("  wall clock an hour back: %d renewals in 1.5 s, longest unchanged %lld ms\n",
              w.changes, static_cast<long long>(w.longest_unchanged.count()));
  EXPECT_GE(w.changes, 3);
  EXPECT_LT(w.longest_unchanged, kLease);
  EXPECT_FALSE(g.verify());
}

}  // namespace
}  // namespace kagi::lock
