// The lock-backend conformance suite: what every backend must do, run against each one through
// the public API (LockService / LockContext), the way handlers use it. The postgres runs use a
// real server (tests/unit/support/pg_cluster.hpp), the lockd runs a real kagi-lockd process
// (tests/support/lockd_server.hpp), and two LockServices play two web hosts: each has its own
// locks.dir (own registry, own in-process table), so they share nothing but the backend. The
// dir runs share one locks.dir (the folder hosts would mount) and differ in
// locks.dir_host_id, so each "host" has its own registry and in-process table there.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/detail/postgres_keys.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/pg/connection.hpp>
#include "../../support/lockd_server.hpp"
#include "../support/pg_cluster.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

template <typename Pred>
bool eventually(Pred pred, Clock::duration limit = 10s) {
  const auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgres") {
      KAGI_NEED_POSTGRES(pg);
      pg_ = pg;
      dsn_ = pg->dsn();
    }
    if (lockd()) {
      if (std::string(KAGI_LOCKD_BIN).empty())
        GTEST_SKIP() << "built without kagi-lockd (KAGI_APPS=OFF)";
      std::string why;
      auto* server = test_support::LockdServer::shared(&why);
      ASSERT_NE(server, nullptr) << why;
      lockd_ = server;
    }
  }
  bool postgres() const { return GetParam() == "postgres"; }
  bool dir() const { return GetParam() == "dir"; }
  bool lockd() const { return GetParam() == "lockd"; }
  // The backends whose locks live in a server that every "host" shares.
  bool remote() const { return postgres() || lockd(); }

  // Host `host`'s lock service with the backend under test. With postgres each host has its own
  // locks.dir; the local backend is one host's by design, so its "hosts" are two services on
  // one locks.dir (like two worker processes).
  std::unique_ptr<LockService> host(int host, std::chrono::milliseconds timeout = 3s,
                                    bool order_fail = false) {
    LockOptions options;
    options.backend = GetParam();
    options.dir = dir_.path() + "/host" + std::to_string(remote() ? host : 0);
    if (dir()) {
      options.dir = dir_.path() + "/shared";
      options.dir_host_id = "host" + std::to_string(host);
    }
    options.timeout = timeout;
    options.order_check_fail = order_fail;
    options.postgres.dsn = dsn_;
    options.postgres_pool = 32;
    options.lockd.address = lockd_ ? lockd_->address() : "";
    options.lockd.pool = 32;
    return LockService::create(options);
  }
  static std::unique_ptr<LockContext> request(LockService& service, const std::string& id) {
    return service.context({id, "POST", "/test/" + id, "192.0.2.1"});
  }

  // Requests queued for `name` in the backend itself (not only announced in the registry), on
  // every host.
  size_t queued(LockService& service, const std::string& name) {
    if (dir()) {  // each host's registry is its own: count them all
      size_t n = 0;
      for (int h = 1; h <= 3; ++h) {
        for (const RegistryEntry& e :
             Registry::read(dir_.path() + "/shared/hosts/host" + std::to_string(h)).entries) {
          n += e.name == name && e.waiting;
        }
      }
      if (n) std::this_thread::sleep_for(5ms);
      return n;
    }
    if (lockd()) return static_cast<size_t>(lockd_->waiters(name));
    if (!postgres()) {
      size_t n = 0;
      for (const RegistryEntry& e : service.snapshot().entries) n += e.name == name && e.waiting;
      if (n) std::this_thread::sleep_for(5ms);  // from the announcement into the table's queue
      return n;
    }
    return sql_count(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = " +
        std::to_string(postgres_key(name)));
  }
  // Advisory locks held or awaited by anyone on the server (postgres only).
  size_t advisory_locks() {
    return sql_count("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1");
  }
  size_t sql_count(const std::string& sql) { return std::stoul(pg_->value(sql)); }

  test_support::TempDir dir_;
  test_support::PgCluster* pg_ = nullptr;
  std::string dsn_;
  test_support::LockdServer* lockd_ = nullptr;
};

TEST_P(BackendTest, ExclusiveExcludesAnotherHost) {
  auto a = host(1), b = host(2);
  auto ra = request(*a, "a");
  auto held = ra->exclusive("conf/x");
  auto rb = request(*b, "b");
  const auto started = Clock::now();
  EXPECT_THROW(rb->exclusive("conf/x", 100ms), LockBusy);
  const auto waited = Clock::now() - started;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 100ms + 500ms);  // bounded: the deadline plus a round trip
  EXPECT_FALSE(rb->try_exclusive("conf/x"));
  EXPECT_FALSE(rb->try_shared("conf/x"));
  held.release();
  EXPECT_TRUE(rb->try_exclusive("conf/x"));
}

TEST_P(BackendTest, SharedHoldersCoexistAndExcludeWriters) {
  auto a = host(1), b = host(2);
  auto r1 = request(*a, "r1"), r2 = request(*b, "r2"), w = request(*b, "w");
  auto s1 = r1->shared("conf/s");
  auto s2 = r2->shared("conf/s");
  EXPECT_FALSE(w->try_exclusive("conf/s"));
  s1.release();
  EXPECT_FALSE(w->try_exclusive("conf/s"));
  s2.release();
  EXPECT_TRUE(w->try_exclusive("conf/s"));
}

// A writer that waits is not overtaken by readers arriving after it, even though only readers
// hold the name: a stream of readers cannot starve it.
TEST_P(BackendTest, AWaitingWriterIsNotOvertakenByLaterReaders) {
  auto a = host(1), b = host(2);
  auto r1 = request(*a, "r1");
  auto reader = r1->shared("conf/w");
  std::atomic<bool> writer_got{false};
  std::thread writer([&] {
    auto w = request(*b, "w");
    auto g = w->exclusive("conf/w", 10s);
    writer_got = true;
  });
  ASSERT_TRUE(eventually([&] { return queued(*b, "conf/w") == 1; }));
  // dir: the writer posts its intent after its first try; wait for that, not for a guess.
  if (dir()) {
    ASSERT_TRUE(eventually(
        [&] { return std::filesystem::exists(dir_.path() + "/shared/dirlocks/conf@w.w"); }));
  }
  // On postgres the server's queue is one for all hosts. The local backend queues strictly
  // within a process and across processes in batches (docs/LOCKING.md): ask on the writer's.
  // dir: the writer's intent stops every host's new readers (a third host here: a reader
  // joining its own host's reader entry looks for an intent once per batch, as local does).
  auto c = dir() ? host(3) : nullptr;
  auto r2 = request(remote() ? *a : dir() ? *c : *b, "r2");
  EXPECT_THROW(r2->shared("conf/w", 50ms), LockBusy);
  EXPECT_FALSE(writer_got);
  reader.release();
  writer.join();
  EXPECT_TRUE(writer_got);
}

TEST_P(BackendTest, WaitersAreServedInArrivalOrder) {
  auto a = host(1), b = host(2);
  auto holder = request(*a, "holder");
  auto held = holder->exclusive("conf/fifo");
  // Appended under the lock; the mutex is for ThreadSanitizer, which cannot see a lock held in
  // a server (it never waits: the lock already orders the appends).
  std::mutex order_mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      auto r = request(i % 2 ? *a : *b, "w" + std::to_string(i));
      auto g = r->exclusive("conf/fifo", 10s);
      std::lock_guard<std::mutex> lock(order_mu);
      order.push_back(i);
    });
    ASSERT_TRUE(eventually([&] { return queued(*a, "conf/fifo") == static_cast<size_t>(i + 1); }));
  }
  held.release();
  for (auto& t : threads) t.join();
  if (remote()) {
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  } else {
    // Across hosts, local locks are one queue per process plus the kernel's flock, which is
    // not FIFO between processes (dir: polling with back-off): every waiter is served, once.
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  }
}

// A set is all or nothing: while one of its names is held elsewhere, none of the others stays
// taken, and the wait is bounded.
TEST_P(BackendTest, ASetIsAllOrNothing) {
  auto a = host(1), b = host(2);
  auto other = request(*b, "other");
  auto blocker = other->exclusive("set/b");
  auto r = request(*a, "r");
  const auto started = Clock::now();
  EXPECT_THROW((r->exclusive_set({"set/c", "set/a", "set/b"}, 150ms)), LockBusy);
  EXPECT_LT(Clock::now() - started, 150ms + 500ms);
  EXPECT_EQ(r->held_count(), 0u);
  // Nothing of the failed set is left behind: the other host takes a and c at once.
  EXPECT_TRUE(other->try_exclusive("set/a"));
  EXPECT_TRUE(other->try_exclusive("set/c"));
  blocker.release();
  other->end_request();
  auto [c, a_guard, b_guard] = r->exclusive_set({"set/c", "set/a", "set/b"});
  EXPECT_EQ(c.name(), "set/c");  // in the order asked
  EXPECT_EQ(a_guard.name(), "set/a");
  EXPECT_EQ(b_guard.name(), "set/b");
  EXPECT_EQ(r->held_count(), 3u);
}

// A set of mixed modes waits for what it needs and is granted when that frees up.
TEST_P(BackendTest, AMixedSetWaitsThenIsGranted) {
  auto a = host(1), b = host(2);
  auto other = request(*b, "other");
  auto writer = other->exclusive("mix/2");
  std::thread freer([&] {
    std::this_thread::sleep_for(100ms);
    writer.release();
  });
  auto r = request(*a, "r");
  auto [index, post] = r->acquire(lock::shared("mix/1"), lock::exclusive("mix/2"));
  freer.join();
  EXPECT_TRUE(index.held());
  EXPECT_TRUE(post.held());
  EXPECT_EQ(post.mode(), Mode::kExclusive);
  EXPECT_EQ(a->stats().total().contended, 1u);  // mix/2 waited, mix/1 did not
  // Another reader may share mix/1 meanwhile.
  EXPECT_TRUE(other->try_shared("mix/1"));
}

TEST_P(BackendTest, LeftoverGuardsAreReleasedAtRequestEnd) {
  auto a = host(1), b = host(2);
  auto r = request(*a, "leaky");
  auto leaked = std::make_unique<ExclusiveGuard>(r->exclusive("leak/x"));
  EXPECT_EQ(r->end_request(), 1u);
  EXPECT_FALSE(leaked->held());
  auto other = request(*b, "other");
  EXPECT_TRUE(other->try_exclusive("leak/x"));
  EXPECT_EQ(a->stats().total().leaks, 1u);
}

TEST_P(BackendTest, TheOrderCheckWorksAsForEveryBackend) {
  auto strict = host(1, 3s, /*order_fail=*/true);
  auto r = request(*strict, "r");
  auto q = r->exclusive("order/q");
  EXPECT_THROW(r->exclusive("order/p"), LockOrderError);
  EXPECT_THROW(r->exclusive("order/q"), LockOrderError);  // already held
  EXPECT_EQ(strict->stats().total().order_violations, 1u);
}

// The seeds' P→Q / Q→P trap, one side on each host: it ends within the timeout.
TEST_P(BackendTest, PThenQAgainstQThenPEndsWithinTheTimeout) {
  auto a = host(1), b = host(2);
  std::barrier both_hold_first(2);
  std::atomic<int> busy{0};
  auto run = [&](LockService& service, const char* first, const char* second) {
    auto ctx = request(service, first);
    auto g1 = ctx->exclusive(first);
    both_hold_first.arrive_and_wait();
    try {
      auto g2 = ctx->exclusive(second, 300ms);
    } catch (const LockBusy&) {
      ++busy;
    }
  };
  const auto started = Clock::now();
  std::thread ta(run, std::ref(*a), "dl/p", "dl/q");
  std::thread tb(run, std::ref(*b), "dl/q", "dl/p");
  ta.join();
  tb.join();
  EXPECT_GE(busy.load(), 1);
  EXPECT_LT(Clock::now() - started, 3s);
}

// No lost update through the lock: threads on two hosts read, pause, and write back a counter.
// (An atomic only so that ThreadSanitizer, which cannot see a lock held in a server, does not
// report the accesses the lock orders; the load and the store are separate, so without the lock
// updates would be lost.)
TEST_P(BackendTest, ACounterUnderTheLockIsExactAcrossHosts) {
  auto a = host(1), b = host(2);
  constexpr int kThreads = 4, kIncrements = 100;
  std::atomic<int> counter{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      LockService& service = t % 2 ? *a : *b;
      for (int i = 0; i < kIncrements; ++i) {
        auto ctx = request(service, "t" + std::to_string(t));
        auto g = ctx->exclusive("counter/x");
        const int seen = counter.load(std::memory_order_relaxed);
        std::this_thread::sleep_for(50us);
        counter.store(seen + 1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter.load(), kThreads * kIncrements);
}

// Names come and go without a trace: nothing is held or queued afterwards, in this process or
// (postgres) on the server. The local backend runs a million names in table_test; here each
// postgres name costs a few round trips (registering it, locking, unlocking): 5,000 here, a
// million by hand (docs/LOCKING.md).
TEST_P(BackendTest, ManyNamesLeaveNothingBehind) {
  auto a = host(1);
  // dir: about ten filesystem calls per name, each a metadata change (and a fencing counter
  // file left per name): 1,000 here.
  const int names = dir() ? 1000 : postgres() ? 5000 : lockd() ? 10000 : 20000;
  for (int i = 0; i < names; ++i) {
    auto r = request(*a, "n");
    auto g = r->exclusive("many/" + std::to_string(i));
    if (i % 3 == 0) {
      auto s = r->shared("many/" + std::to_string(i) + "/s");
    }
  }
  EXPECT_EQ(a->active_names(), 0u);
  if (postgres()) {
    EXPECT_EQ(advisory_locks(), 0u);
  }
  if (lockd()) {  // the server keeps nothing of a key nobody holds or waits for
    EXPECT_EQ(lockd_->status(), std::vector<std::string>());
  }
}

TEST_P(BackendTest, VerifyHoldsWhileTheLockIsHeld) {
  auto a = host(1);
  auto r = request(*a, "r");
  auto g = r->exclusive("verify/x");
  EXPECT_FALSE(g.verify());
  g.release();
  EXPECT_EQ(g.verify(), Errc::kReleased);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest,
                         ::testing::Values("local", "postgres", "dir", "lockd"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kagi::lock
