// The offline lock manager on both stores: what each kind lets another owner do, expiry,
// renewal, take-over, release, limits, and grants decided once across processes.
#include <kagi/offline/lock_manager.hpp>

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../support/child_process.hpp"
#include "state_fixture.hpp"

namespace kagi::offline {
namespace {

using namespace std::chrono_literals;

constexpr Kind kKinds[] = {Kind::kExclusiveWrite, Kind::kExclusiveRead, Kind::kRead, Kind::kWrite};

class LockManagerTest : public StateTest {
 protected:
  std::unique_ptr<LockManager> manager(ManagerOptions options = {}) {
    options.min_ttl = 50ms;  // the expiry tests use short ones
    options.sweep_interval = 0ms;
    return std::make_unique<LockManager>(open_store(), options);
  }
  static Owner owner(const std::string& id) { return {id, "name of " + id}; }
};

TEST_P(LockManagerTest, OnlyReadersShareAKey) {
  auto m = manager();
  int n = 0;
  for (Kind held : kKinds) {
    for (Kind wanted : kKinds) {
      const std::string key = "post/" + std::to_string(++n);
      ASSERT_TRUE(m->acquire(key, held, owner("a"), 60s).value().granted());
      const Grant g = m->acquire(key, wanted, owner("b"), 60s).value();
      const bool both_read = held == Kind::kRead && wanted == Kind::kRead;
      EXPECT_EQ(g.granted(), both_read) << kind_name(held) << " then " << kind_name(wanted);
      EXPECT_EQ(compatible(held, wanted), both_read);
      if (!g.granted()) {
        // Denied early, saying who holds it, how and until when.
        ASSERT_EQ(g.holders.size(), 1u);
        EXPECT_EQ(g.holders[0].owner, "a");
        EXPECT_EQ(g.holders[0].owner_name, "name of a");
        EXPECT_EQ(g.holders[0].kind, held);
        EXPECT_GT(g.holders[0].expires_ms, g.now_ms);
        EXPECT_LE(g.holders[0].expires_ms, g.now_ms + 60'000);
      }
      EXPECT_EQ(m->inspect(key).value().size(), both_read ? 2u : 1u);
    }
  }
  const Counters c = m->counters().value();
  EXPECT_EQ(c.grants, 16 + 1);  // every first holder, and the one read beside a read
  EXPECT_EQ(c.denials, 15);
}

TEST_P(LockManagerTest, AWriterWaitsForEveryReaderAndAReaderForTheWriter) {
  auto m = manager();
  ASSERT_TRUE(m->acquire("doc/1", Kind::kRead, owner("r1"), 60s).value().granted());
  ASSERT_TRUE(m->acquire("doc/1", Kind::kRead, owner("r2"), 60s).value().granted());
  // r1 would upgrade to write: r2 still reads.
  Grant g = m->acquire("doc/1", Kind::kWrite, owner("r1"), 60s).value();
  ASSERT_FALSE(g.granted());
  ASSERT_EQ(g.holders.size(), 1u);
  EXPECT_EQ(g.holders[0].owner, "r2");
  EXPECT_TRUE(m->release("doc/1", "r2").value());
  EXPECT_TRUE(m->acquire("doc/1", Kind::kWrite, owner("r1"), 60s).value().granted());
  auto held = m->inspect("doc/1").value();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].kind, Kind::kWrite);
  EXPECT_FALSE(m->acquire("doc/1", Kind::kRead, owner("r3"), 60s).value().granted());
}

TEST_P(LockManagerTest, AskingAgainRenewsAndKeepsSince) {
  auto m = manager();
  const Grant first = m->acquire("post/a", Kind::kExclusiveWrite, owner("a"), 1s).value();
  std::this_thread::sleep_for(20ms);
  const Grant again = m->acquire("post/a", Kind::kExclusiveWrite, owner("a"), 60s).value();
  ASSERT_TRUE(again.granted());
  EXPECT_GT(again.expires_ms, first.expires_ms);
  const auto held = m->holds("post/a", "a").value();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->since_ms, first.now_ms);
  EXPECT_EQ(held->expires_ms, again.expires_ms);
  EXPECT_EQ(m->counters().value().grants, 1);  // a renewal is not a grant
}

TEST_P(LockManagerTest, AnExpiredLockIsIgnoredAtOnceAndSweptLater) {
  ManagerOptions o;
  auto m = manager(o);
  ASSERT_TRUE(m->acquire("post/e", Kind::kExclusiveWrite, owner("a"), 150ms).value().granted());
  EXPECT_FALSE(m->acquire("post/e", Kind::kExclusiveWrite, owner("b"), 60s).value().granted());
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(m->inspect("post/e").value().empty());
  EXPECT_FALSE(m->holds("post/e", "a").value());
  EXPECT_EQ(m->renew("post/e", "a").value(), 0);  // too late: it must be acquired again
  EXPECT_TRUE(m->acquire("post/e", Kind::kExclusiveWrite, owner("b"), 60s).value().granted());
  EXPECT_FALSE(m->release("post/e", "a").value());

  ASSERT_TRUE(m->acquire("post/f", Kind::kRead, owner("c"), 100ms).value().granted());
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(m->sweep().value(), 1);
  EXPECT_EQ(m->list().value().size(), 1u);  // b's lock on post/e
  EXPECT_EQ(m->counters().value().expiries, 2);
}

TEST_P(LockManagerTest, RenewExtendsByTheGrantedTtl) {
  auto m = manager();
  const Grant g = m->acquire("post/r", Kind::kExclusiveWrite, owner("a"), 300ms).value();
  std::this_thread::sleep_for(200ms);
  const int64_t renewed = m->renew("post/r", "a").value();
  EXPECT_GE(renewed, g.expires_ms + 150);
  EXPECT_LE(renewed, g.expires_ms + 1000);
  std::this_thread::sleep_for(200ms);  // past the first expiry, not the renewed one
  EXPECT_TRUE(m->holds("post/r", "a").value());
  EXPECT_EQ(m->renew("post/r", "b").value(), 0);  // not b's
}

TEST_P(LockManagerTest, ReleaseAndReleaseAll) {
  auto m = manager();
  for (const char* key : {"k/1", "k/2", "k/3"}) {
    ASSERT_TRUE(m->acquire(key, Kind::kExclusiveWrite, owner("a"), 60s).value().granted());
  }
  ASSERT_TRUE(m->acquire("k/4", Kind::kExclusiveWrite, owner("b"), 60s).value().granted());
  EXPECT_FALSE(m->release("k/1", "b").value());  // not b's: nothing happens
  EXPECT_TRUE(m->release("k/1", "a").value());
  EXPECT_FALSE(m->release("k/1", "a").value());
  EXPECT_EQ(m->release_all("a").value(), 2);
  const auto left = m->list().value();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].key, "k/4");
  EXPECT_EQ(m->counters().value().releases, 3);
}

TEST_P(LockManagerTest, TakeOverTellsTheOldOwnerOnce) {
  auto m = manager();
  ASSERT_TRUE(m->acquire("post/t", Kind::kExclusiveWrite, owner("a"), 60s).value().granted());
  const Grant g = m->take_over("post/t", Kind::kExclusiveWrite, {"b", "Bob"}, 60s).value();
  ASSERT_TRUE(g.granted());
  const auto held = m->inspect("post/t").value();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].owner, "b");
  EXPECT_FALSE(m->holds("post/t", "a").value());
  const auto notices = m->take_notices("a").value();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("post/t"), std::string::npos) << notices[0];
  EXPECT_NE(notices[0].find("Bob"), std::string::npos) << notices[0];
  EXPECT_TRUE(m->take_notices("a").value().empty());
  EXPECT_TRUE(m->take_notices("b").value().empty());
  EXPECT_EQ(m->counters().value().takeovers, 1);
}

TEST_P(LockManagerTest, ForceReleaseTellsTheOwner) {
  auto m = manager();
  ASSERT_TRUE(m->acquire("post/x", Kind::kExclusiveRead, owner("a"), 60s).value().granted());
  EXPECT_TRUE(m->force_release("post/x", "a").value());
  EXPECT_FALSE(m->force_release("post/x", "a").value());
  EXPECT_TRUE(m->inspect("post/x").value().empty());
  const auto notices = m->take_notices("a").value();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("administrator"), std::string::npos) << notices[0];
  EXPECT_EQ(m->counters().value().force_releases, 1);
}

TEST_P(LockManagerTest, AnOwnerHoldsAtMostItsLimitAndTtlsAreClamped) {
  ManagerOptions o;
  o.max_per_owner = 2;
  o.max_ttl = 10s;
  auto m = manager(o);
  const Grant g = m->acquire("m/1", Kind::kExclusiveWrite, owner("a"), 10h).value();
  ASSERT_TRUE(g.granted());
  EXPECT_LE(g.expires_ms, g.now_ms + 10'000);
  const Grant tiny = m->acquire("m/2", Kind::kExclusiveWrite, owner("a"), 1ms).value();
  EXPECT_EQ(tiny.expires_ms, tiny.now_ms + 50);  // min_ttl
  EXPECT_EQ(m->acquire("m/3", Kind::kExclusiveWrite, owner("a"), 60s).value().outcome,
            Grant::kTooMany);
  EXPECT_TRUE(m->acquire("m/1", Kind::kExclusiveWrite, owner("a"), 60s).value().granted());
  std::this_thread::sleep_for(80ms);  // m/2 ran out: a place again
  EXPECT_TRUE(m->acquire("m/3", Kind::kExclusiveWrite, owner("a"), 60s).value().granted());
}

TEST_P(LockManagerTest, KeysAndOwnersAreValidated) {
  auto m = manager();
  for (const char* bad : {"", "Post/1", "post/../x", "post//1", "/post", "post/1 x"}) {
    auto r = m->acquire(bad, Kind::kExclusiveWrite, owner("a"), 60s);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), std::errc::invalid_argument) << bad;
    EXPECT_NE(r.status().message().find("not a valid lock name"), std::string::npos);
  }
  EXPECT_FALSE(m->acquire("post/1", Kind::kExclusiveWrite, {"", "x"}, 60s).ok());
  // A hostile display name is stored as one plain line.
  const Owner hostile{"h", std::string("eve\n\x1b[31m\xe2\x80\xae") + std::string(500, 'x')};
  ASSERT_TRUE(m->acquire("post/1", Kind::kExclusiveWrite, hostile, 60s).value().granted());
  const std::string shown = m->inspect("post/1").value().at(0).owner_name;
  EXPECT_EQ(shown.substr(0, 6), "eve[31");
  EXPECT_LE(shown.size(), 128u);
  EXPECT_EQ(shown.find('\n'), std::string::npos);
}

// Eight processes ask for the same fresh key at once, a thousand times: each time exactly one
// of them is granted it.
TEST_P(LockManagerTest, ConcurrentAcquireFromEightProcessesHasOneWinnerPerKey) {
  constexpr int kProcesses = 8, kRounds = 1000;
  (void)open_store();  // the tables exist before the children race
  struct Shared {
    pthread_barrier_t barrier;
    std::atomic<int> winners[kRounds];
    std::atomic<int> failures;
  };
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&shared->barrier, &attr, kProcesses);

  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(test_support::spawn([&, p] {
      LockManager m(open_store(), ManagerOptions{});
      for (int round = 0; round < kRounds; ++round) {
        pthread_barrier_wait(&shared->barrier);
        auto g = m.acquire("race/" + std::to_string(round), Kind::kExclusiveWrite,
                           {"p" + std::to_string(p) + "r" + std::to_string(round), "process"}, 60s);
        if (!g.ok()) {
          std::fprintf(stderr, "round %d: %s\n", round, g.status().message().c_str());
          shared->failures.fetch_add(1);
        } else if (g->granted()) {
          shared->winners[round].fetch_add(1);
        }
      }
      return 0;
    }));
  }
  for (pid_t c : children) EXPECT_EQ(test_support::wait_exit(c), 0);
  EXPECT_EQ(shared->failures.load(), 0);
  int exactly_one = 0;
  for (int round = 0; round < kRounds; ++round) exactly_one += shared->winners[round].load() == 1;
  EXPECT_EQ(exactly_one, kRounds);
  const Counters c = LockManager(open_store(), {}).counters().value();
  EXPECT_EQ(c.grants, kRounds);
  EXPECT_EQ(c.denials, kRounds * (kProcesses - 1));
  pthread_barrier_destroy(&shared->barrier);
  munmap(mem, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(Stores, LockManagerTest, ::testing::Values("sqlite", "postgres"),
                         backend_name);

}  // namespace
}  // namespace kagi::offline
