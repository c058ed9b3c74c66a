// Revocation: a holder past locks.max_hold_ms, or one an admin revokes through the status
// registry, loses its lock to the next waiter (in this process or another), its guard is
// fenced, and its own late release does not disturb the new holder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <kagi/lock/detail/names.hpp>
#include <kagi/lock/lock_service.hpp>
#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

class RevokeTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockService> make_service(std::chrono::milliseconds max_hold,
                                            std::chrono::milliseconds interval = 10ms) {
    LockOptions options;
    options.dir = dir_.path() + "/locks";
    options.timeout = 10s;
    options.max_hold = max_hold;
    options.watchdog_interval = interval;
    return LockService::create(options);
  }
  static std::unique_ptr<LockContext> request(LockService& service, const std::string& id) {
    return service.context({id, "POST", "/test/" + id, "192.0.2.1"});
  }
  static size_t count_in_registry(LockService& service, const std::string& name, bool waiting) {
    size_t n = 0;
    for (const RegistryEntry& e : service.snapshot().entries)
      n += e.name == name && e.waiting == waiting;
    return n;
  }

  test_support::TempDir dir_;
};

TEST_F(RevokeTest, AHolderPastMaxHoldLosesItsLockToTheWaiter) {
  auto service = make_service(150ms);
  auto hung = request(*service, "hung");
  const auto taken = Clock::now();  // before: the hold is timed from the acquire call
  ExclusiveGuard stale = hung->exclusive("test/hung");

  // A second request waits for the name; it gets it once the watchdog revokes the first.
  std::error_code got;
  Guard next_guard;
  auto next = request(*service, "next");
  std::thread waiter(
      [&] { got = next->try_acquire_for("test/hung", Mode::kExclusive, 10s, next_guard); });
  waiter.join();
  const auto waited = Clock::now() - taken;
  ASSERT_FALSE(got) << got.message();
  EXPECT_GE(waited, 150ms);  // not before max_hold

  // The stale guard is fenced: storage asks verify() right before a commit becomes visible.
  EXPECT_FALSE(stale.held());
  EXPECT_EQ(stale.verify(), Errc::kRevoked);
  EXPECT_TRUE(next_guard.held());
  EXPECT_FALSE(next_guard.verify());

  // The hung request finally lets go: a no-op that leaves the new holder alone.
  stale.release();
  EXPECT_TRUE(next_guard.held());
  EXPECT_FALSE(next_guard.verify());
  auto third = request(*service, "third");
  EXPECT_FALSE(third->try_exclusive("test/hung").has_value()) << "the new holder lost its lock";
  EXPECT_EQ(count_in_registry(*service, "test/hung", false), 1u);

  next_guard.release();
  EXPECT_TRUE(third->try_exclusive("test/hung").has_value());

  // Counted under the prefix, and recorded as an event naming the hung request.
  EXPECT_EQ(service->stats().prefixes["test"].revocations, 1u);
  bool event = false;
  for (const LockEvent& e : service->recent_events()) {
    if (e.kind == EventKind::kRevoked && e.name == "test/hung" && e.who.request_id == "hung") {
      event = e.detail.find("max_hold_ms") != std::string::npos;
    }
  }
  EXPECT_TRUE(event);
  EXPECT_EQ(hung->end_request(), 0u);  // the released stale guard is not a leak
}

TEST_F(RevokeTest, RevocationReleasesTheFileLockForAnotherProcess) {
  auto service = make_service(150ms);
  auto hung = request(*service, "hung");
  ExclusiveGuard stale = hung->exclusive("test/crossproc");

  // Another process takes the name's file lock the way a worker's backend does (flock on
  // the lock file), retrying for at most 10 s. Only system calls in the child: no threads
  // after fork() (ThreadSanitizer runs this suite too).
  const std::string file = dir_.path() + "/locks/" + lock_file_name("test/crossproc");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) _exit(2);
    for (int i = 0; i < 10000; ++i) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) _exit(0);
      const struct timespec ms { 0, 1000000 };
      ::nanosleep(&ms, nullptr);
    }
    _exit(1);
  }
  int status = -1;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the other process never got the revoked lock";
  EXPECT_EQ(stale.verify(), Errc::kRevoked);
}

TEST_F(RevokeTest, SharedHoldersAreRevokedToo) {
  auto service = make_service(100ms);
  auto reader = request(*service, "reader");
  SharedGuard stale = reader->shared("test/shared");
  auto writer = request(*service, "writer");
  ExclusiveGuard w = writer->exclusive("test/shared", 10s);
  EXPECT_TRUE(w.held());
  EXPECT_EQ(stale.verify(), Errc::kRevoked);
}

TEST_F(RevokeTest, WithoutMaxHoldNothingIsRevoked) {
  auto service = make_service(0ms, 1h);  // the thread never runs a pass during the test
  auto ctx = request(*service, "slow");
  ExclusiveGuard g = ctx->exclusive("test/slow");
  std::this_thread::sleep_for(20ms);  // a hold of some length, not a synchronisation
  EXPECT_EQ(service->revoke_due(), 0u);
  EXPECT_TRUE(g.held());
  EXPECT_FALSE(g.verify());
}

TEST_F(RevokeTest, AnAdminRevokeThroughTheRegistryRevokesExactlyThatRecord) {
  auto service = make_service(0ms, 1h);  // passes run by the test only
  auto ctx = request(*service, "held");
  ExclusiveGuard g = ctx->exclusive("test/admin");
  auto snap = service->snapshot();
  ASSERT_EQ(snap.entries.size(), 1u);
  const RegistryEntry seen = snap.entries[0];
  EXPECT_GE(seen.slot, 0);
  EXPECT_NE(seen.seq, 0u);

  ASSERT_FALSE(service->request_revoke(seen));
  EXPECT_TRUE(g.held());  // asked, not done: the owner's watchdog does it
  EXPECT_EQ(service->revoke_due(), 1u);
  EXPECT_EQ(g.verify(), Errc::kRevoked);
  EXPECT_EQ(count_in_registry(*service, "test/admin", false), 0u);
  bool event = false;
  for (const LockEvent& e : service->recent_events()) {
    event |= e.kind == EventKind::kRevoked && e.detail == "revoked from the admin page";
  }
  EXPECT_TRUE(event);

  // The same request again (a second click, a stale page): the record is gone.
  EXPECT_EQ(service->request_revoke(seen), Errc::kReleased);
  // The name taken again, likely in the same slot: the old request must not touch it.
  g.release();
  ExclusiveGuard again = ctx->exclusive("test/admin");
  EXPECT_EQ(service->request_revoke(seen), Errc::kReleased);
  EXPECT_EQ(service->revoke_due(), 0u);
  EXPECT_TRUE(again.held());
}

TEST_F(RevokeTest, RevokeRequestsForMissingProcessesOrSlotsAreErrors) {
  auto service = make_service(0ms, 1h);
  RegistryEntry e;
  e.pid = ::getpid();
  e.slot = 1 << 30;
  e.seq = 2;
  EXPECT_EQ(service->request_revoke(e), std::errc::invalid_argument);
  e.slot = 0;
  e.seq = 3;  // odd: a record being written, never a valid request
  EXPECT_EQ(service->request_revoke(e), std::errc::invalid_argument);
  e.seq = 2;
  e.pid = 0;  // no such registry file
  EXPECT_EQ(service->request_revoke(e), Errc::kReleased);
}

TEST_F(RevokeTest, RefusesANegativeMaxHold) {
  LockOptions options;
  options.dir = dir_.path() + "/locks";
  options.max_hold = -1ms;
  EXPECT_THROW(LockService::create(options), std::invalid_argument);
}

}  // namespace
}  // namespace kagi::lock
