// One suite for every DataStore: the files store (DataDir) and the postgres store
// (PgDataStore, against a real server: tests/unit/support/pg_cluster.hpp) must keep the same
// rules — reads and writes, logs and cursors, errors, fencing, change notices — seen from two
// "hosts" (two lock services and two stores on the same data). What only one backend has is
// tested after the suite (and in data_dir_test.cpp for the files' crash safety).
#include <kagi/store/data_store.hpp>

#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_domain.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/numbered_log.hpp>
#include <kagi/store/pg_data_store.hpp>
#include "../support/pg_cluster.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::store {
namespace {

using namespace std::chrono_literals;

// One web host: its locks and its store.
struct Host {
  std::unique_ptr<lock::LockService> locks;
  std::unique_ptr<DataStore> data;
  std::unique_ptr<lock::LockContext> request(const std::string& id) {
    return locks->context({id, "POST", "/test/" + id, "192.0.2.1"});
  }
};

class DataStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgres") {
      KAGI_NEED_POSTGRES(pg);
      pg_ = pg;
      dsn_ = pg->fresh_database_dsn();  // tests must not see each other's rows
    }
    hosts_[0] = make_host("a");
    hosts_[1] = make_host("b");
    ASSERT_TRUE(hosts_[0].data && hosts_[1].data);
  }

  lock::LockOptions lock_options(const std::string& host) {
    lock::LockOptions o;
    o.timeout = 3s;
    o.dir = dir_.path() + "/locks";  // local: one lock folder, as processes of one host share
    if (GetParam() == "postgres") {
      o.backend = "postgres";
      o.postgres.dsn = dsn_;
      o.postgres.application_name = "kagi/" + host + "/1";
    }
    return o;
  }

  Host make_host(const std::string& name) {
    Host h;
    h.locks = lock::LockService::create(lock_options(name));
    std::error_code ec;
    if (GetParam() == "files") {
      h.data = DataDir::open({.dir = dir_.path() + "/data", .fsync = false}, ec);
    } else {
      PgDataOptions o;
      o.connect.dsn = dsn_;
      o.on_lock_connection = true;
      o.fsync = false;
      o.lock_domain = lock::lock_domain(h.locks->options());
      std::string why;
      h.data = PgDataStore::open(o, ec, &why);
      EXPECT_TRUE(h.data) << why;
    }
    EXPECT_FALSE(ec) << ec.message();
    return h;
  }

  Host& a() { return hosts_[0]; }
  Host& b() { return hosts_[1]; }

  test_support::TempDir dir_;
  test_support::PgCluster* pg_ = nullptr;
  std::string dsn_;
  Host hosts_[2];
};

std::vector<std::string> read_all(DataStore& data, const lock::Guard& g, std::string_view path) {
  return data.read_log(g, path).value();
}

TEST_P(DataStoreTest, AMissingFileReadsEmptyAndDoesNotExist) {
  auto r = a().request("r");
  auto g = r->shared("t/doc");
  EXPECT_EQ(a().data->read(g, "t/doc.txt").value(), "");
  EXPECT_FALSE(a().data->exists(g, "t/doc.txt").value());
  EXPECT_TRUE(a().data->read_log(g, "t/doc.log").value().empty());
}

TEST_P(DataStoreTest, ACommitReplacesTheWholeContentWithAnyBytes) {
  std::string bytes("a\0b\xff\x01'\"\\", 8);
  bytes += std::string(100000, 'x');
  {
    auto r = a().request("w");
    auto g = r->exclusive("t/doc");
    ASSERT_TRUE(a().data->commit(g, "t/doc.bin", "first version").ok());
    ASSERT_TRUE(a().data->commit(g, "t/doc.bin", bytes).ok());
  }
  auto r = b().request("r");  // the other host
  auto g = r->shared("t/doc");
  EXPECT_EQ(b().data->read(g, "t/doc.bin").value(), bytes);
  EXPECT_TRUE(b().data->exists(g, "t/doc.bin").value());
}

TEST_P(DataStoreTest, RemoveDeletesAFileOrALogAndAMissingOneIsFine) {
  auto r = a().request("w");
  auto g = r->exclusive("t/rm");
  ASSERT_TRUE(a().data->commit(g, "t/rm.txt", "x").ok());
  ASSERT_TRUE(a().data->append(g, "t/rm.log", "one").ok());
  ASSERT_TRUE(a().data->remove(g, "t/rm.txt").ok());
  ASSERT_TRUE(a().data->remove(g, "t/rm.log").ok());
  EXPECT_TRUE(a().data->remove(g, "t/never.txt").ok());
  EXPECT_FALSE(a().data->exists(g, "t/rm.txt").value());
  EXPECT_FALSE(a().data->exists(g, "t/rm.log").value());
  EXPECT_TRUE(read_all(*a().data, g, "t/rm.log").empty());
}

TEST_P(DataStoreTest, ALogKeepsItsRecordsInOrderAndReadsTheLastN) {
  auto r = a().request("w");
  auto g = r->exclusive("t/log");
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(a().data->append(g, "t/a.log", "rec" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(a().data->append(g, "t/a.log", std::string("\0\xfe", 2)).ok());
  const auto all = read_all(*a().data, g, "t/a.log");
  ASSERT_EQ(all.size(), 11u);
  EXPECT_EQ(all.front(), "rec0");
  EXPECT_EQ(all[9], "rec9");
  EXPECT_EQ(all.back(), std::string("\0\xfe", 2));
  const auto last = a().data->read_log(g, "t/a.log", 3).value();
  EXPECT_EQ(last, (std::vector<std::string>{"rec8", "rec9", std::string("\0\xfe", 2)}));
  EXPECT_TRUE(a().data->exists(g, "t/a.log").value());
}

TEST_P(DataStoreTest, ReadSinceACursorReturnsOnlyWhatAnotherHostAppended) {
  LogCursor cursor;
  {
    auto r = a().request("w");
    auto g = r->exclusive("t/since");
    ASSERT_TRUE(a().data->append(g, "t/s.log", "1").ok());
    ASSERT_TRUE(a().data->append(g, "t/s.log", "2").ok());
  }
  {
    auto r = b().request("r");
    auto g = r->shared("t/since");
    LogTail tail = b().data->read_log_since(g, "t/s.log", cursor).value();
    EXPECT_TRUE(tail.restarted);  // a first read: the whole log
    EXPECT_EQ(tail.records, (std::vector<std::string>{"1", "2"}));
    tail = b().data->read_log_since(g, "t/s.log", cursor).value();
    EXPECT_TRUE(tail.records.empty());  // nothing new
    EXPECT_FALSE(tail.restarted);
  }
  {
    auto r = a().request("w2");
    auto g = r->exclusive("t/since");
    ASSERT_TRUE(a().data->append(g, "t/s.log", "3").ok());
  }
  auto r = b().request("r2");
  auto g = r->shared("t/since");
  LogTail tail = b().data->read_log_since(g, "t/s.log", cursor).value();
  EXPECT_FALSE(tail.restarted);
  EXPECT_EQ(tail.records, (std::vector<std::string>{"3"}));
}

TEST_P(DataStoreTest, ARewrittenOrRemovedLogRestartsTheCursor) {
  LogCursor cursor;
  auto r = a().request("w");
  auto g = r->exclusive("t/rw");
  for (const char* rec : {"1", "2", "3"}) ASSERT_TRUE(a().data->append(g, "t/rw.log", rec).ok());
  ASSERT_EQ(b().data->read_log_since(g, "t/rw.log", cursor).value().records.size(), 3u);
  ASSERT_TRUE(a().data->rewrite_log(g, "t/rw.log", {"only", "these"}).ok());
  LogTail tail = b().data->read_log_since(g, "t/rw.log", cursor).value();
  EXPECT_TRUE(tail.restarted);
  EXPECT_EQ(tail.records, (std::vector<std::string>{"only", "these"}));
  ASSERT_TRUE(a().data->append(g, "t/rw.log", "after").ok());
  tail = b().data->read_log_since(g, "t/rw.log", cursor).value();
  EXPECT_FALSE(tail.restarted);
  EXPECT_EQ(tail.records, (std::vector<std::string>{"after"}));
  EXPECT_EQ(read_all(*a().data, g, "t/rw.log"),
            (std::vector<std::string>{"only", "these", "after"}));
  ASSERT_TRUE(a().data->remove(g, "t/rw.log").ok());
  tail = b().data->read_log_since(g, "t/rw.log", cursor).value();
  EXPECT_TRUE(tail.restarted);
  EXPECT_TRUE(tail.records.empty());
}

TEST_P(DataStoreTest, BadCallsGetTheSameErrorsAndChangeNothing) {
  auto r = a().request("w");
  auto g = r->exclusive("t/err");
  for (const char* bad : {"../escape", "/etc/passwd", "a//b", "t/.kagi-tmp-x", ""}) {
    Status s = a().data->commit(g, bad, "x");
    EXPECT_EQ(s.code(), Errc::kUnsafePath) << bad << ": " << s.message();
    EXPECT_EQ(a().data->read(g, bad).status().code(), Errc::kUnsafePath) << bad;
  }
  Status big = a().data->append(g, "t/big.log", std::string(kMaxRecord + 1, 'x'));
  EXPECT_EQ(big.code(), Errc::kTooLarge) << big.message();
  EXPECT_TRUE(read_all(*a().data, g, "t/big.log").empty());

  lock::ExclusiveGuard gone = r->exclusive("t/gone");
  gone.release();
  Status s = a().data->commit(gone, "t/gone.txt", "x");
  EXPECT_EQ(s.code(), Errc::kNotHeld) << s.message();
  EXPECT_FALSE(a().data->exists(g, "t/gone.txt").value());

  // A guard that outlived its request is inert: nothing it writes lands.
  auto ended = a().request("ended");
  lock::ExclusiveGuard leaked = ended->exclusive("t/leak");
  ended->end_request();
  EXPECT_EQ(a().data->append(leaked, "t/leak.log", "x").code(), Errc::kNotHeld);
  EXPECT_TRUE(read_all(*a().data, g, "t/leak.log").empty());
}

// Fencing, the same on both backends: a holder whose lock was taken away (held past
// locks.max_hold_ms, revoked by the watchdog) cannot write, and the next holder's data stands.
TEST_P(DataStoreTest, ARevokedHolderCannotWriteAndTheNextHoldersDataStands) {
  lock::LockOptions o = lock_options("slow");
  o.max_hold = 100ms;
  o.watchdog_interval = 20ms;
  auto slow_locks = lock::LockService::create(o);
  auto slow = slow_locks->context({"slow", "POST", "/test/slow", "192.0.2.1"});
  lock::ExclusiveGuard stale = slow->exclusive("t/revoked");
  {
    auto r = a().request("next");
    auto g = r->exclusive("t/revoked", 3000ms);  // granted once the watchdog revoked `stale`
    ASSERT_TRUE(a().data->commit(g, "t/revoked.txt", "next holder").ok());
  }
  Status s = a().data->commit(stale, "t/revoked.txt", "stale holder");
  EXPECT_EQ(s.code(), lock::Errc::kRevoked) << s.message();
  EXPECT_EQ(a().data->append(stale, "t/revoked.log", "stale").code(), lock::Errc::kRevoked);
  auto r = b().request("read");
  auto g = r->shared("t/revoked");
  EXPECT_EQ(b().data->read(g, "t/revoked.txt").value(), "next holder");
  EXPECT_TRUE(read_all(*b().data, g, "t/revoked.log").empty());
}

// The lost-update test of the storage layer: read, add one, write back, from two hosts and
// several threads each; the count is exact only if every write was under the lock.
TEST_P(DataStoreTest, ACounterUnderTheLockIsExactAcrossHosts) {
  constexpr int kThreads = 3, kRounds = 30;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, h, t] {
        for (int i = 0; i < kRounds; ++i) {
          auto r = hosts_[h].request("c" + std::to_string(t));
          auto g = r->exclusive("t/counter");
          const std::string text = hosts_[h].data->read(g, "t/counter.txt").value();
          const int n = text.empty() ? 0 : std::stoi(text);
          if (!hosts_[h].data->commit(g, "t/counter.txt", std::to_string(n + 1)).ok()) {
            failures.fetch_add(1);
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto r = a().request("r");
  auto g = r->shared("t/counter");
  EXPECT_EQ(a().data->read(g, "t/counter.txt").value(), std::to_string(2 * kThreads * kRounds));
}

struct Note {
  int64_t id = 0;
  std::string text;
};
std::string encode(const Note& n) { return join_fields({std::to_string(n.id), n.text}); }
std::optional<Note> decode_note(std::string_view record) {
  auto f = split_fields(record, 2);
  if (!f) return std::nullopt;
  return Note{parse_int((*f)[0]).value_or(0), std::string((*f)[1])};
}

// The per-process decoded copy of a numbered log stays current when another host appends, and
// restarts when another host compacts.
TEST_P(DataStoreTest, ANumberedLogCacheFollowsAnotherHostsAppendsAndCompactions) {
  NumberedLogCache<Note> cache_a(4, decode_note), cache_b(4, decode_note);
  auto add = [&](Host& host, NumberedLogCache<Note>& cache, const std::string& text) {
    auto r = host.request("add");
    auto g = r->exclusive("t/notes");
    NumberedLog<Note> log = cache.read(*host.data, g, "t/notes.log");
    add_numbered(*host.data, g, "t/notes.log", log, Note{log.last_id + 1, text}, cache.keep());
  };
  auto ids = [&](Host& host, NumberedLogCache<Note>& cache) {
    auto r = host.request("read");
    auto g = r->shared("t/notes");
    NumberedLog<Note> log = cache.read(*host.data, g, "t/notes.log");
    std::vector<int64_t> out;
    for (const Note& n : log.items) out.push_back(n.id);
    return out;
  };
  for (int i = 0; i < 3; ++i) add(a(), cache_a, "a" + std::to_string(i));
  EXPECT_EQ(ids(b(), cache_b), (std::vector<int64_t>{1, 2, 3}));
  // Compacts at the 17th record (kCompactAtKeepTimes × keep = 16 before it), then appends after.
  for (int i = 0; i < 20; ++i) add(i % 2 ? a() : b(), i % 2 ? cache_a : cache_b, "x");
  EXPECT_EQ(ids(a(), cache_a), (std::vector<int64_t>{20, 21, 22, 23}));
  EXPECT_EQ(ids(b(), cache_b), (std::vector<int64_t>{20, 21, 22, 23}));
}

// Waits up to 5 s for `feed` to report something; returns what drain() gave.
std::vector<std::string> wait_for_news(ChangeFeed& feed) {
  std::vector<std::string> changed;
  for (auto until = std::chrono::steady_clock::now() + 5s;
       changed.empty() && std::chrono::steady_clock::now() < until;) {
    pollfd p{feed.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) > 0 || feed.fd() < 0) feed.drain(changed);
  }
  return changed;
}

TEST_P(DataStoreTest, AWatcherHearsAnotherHostsWriteBelowItsFolderOnly) {
  std::error_code ec;
  auto feed = a().data->watch("t/rooms", ec);
  ASSERT_TRUE(feed) << ec.message();
  auto other = b().data->watch("t/rooms", ec);  // b runs the same apps: it watches too
  ASSERT_TRUE(other) << ec.message();
  {
    auto r = b().request("w");
    auto g = r->exclusive("t/outside");
    ASSERT_TRUE(b().data->append(g, "t/outside.log", "not watched").ok());
  }
  {
    auto r = b().request("w");
    auto g = r->exclusive("t/room");
    ASSERT_TRUE(b().data->append(g, "t/rooms/lobby.log", "hello").ok());
  }
  const std::vector<std::string> news = wait_for_news(*feed);
  ASSERT_FALSE(news.empty()) << "no notice of another host's append";
  for (const std::string& path : news) EXPECT_TRUE(path.starts_with("t/rooms/")) << path;
  EXPECT_NE(std::find(news.begin(), news.end(), "t/rooms/lobby.log"), news.end());
}

INSTANTIATE_TEST_SUITE_P(Backends, DataStoreTest, ::testing::Values("files", "postgres"),
                         [](const auto& info) { return info.param; });

// --- only the postgres store ------------------------------------------------------------

class PgDataStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KAGI_NEED_POSTGRES(pg);
    pg_ = pg;
    dsn_ = pg->fresh_database_dsn();  // tests must not see each other's rows
  }
  lock::LockOptions lock_options(const std::string& host) {
    lock::LockOptions o;
    o.backend = "postgres";
    o.timeout = 3s;
    o.dir = dir_.path() + "/locks";
    o.postgres.dsn = dsn_;
    o.postgres.application_name = "kagi/" + host + "/1";
    return o;
  }
  std::unique_ptr<PgDataStore> open(const lock::LockOptions& locks, bool on_lock_connection,
                                    std::error_code& ec, std::string& why) {
    PgDataOptions o;
    o.connect.dsn = dsn_;
    o.on_lock_connection = on_lock_connection;
    o.lock_domain = lock::lock_domain(locks);
    o.timeout = 2s;
    return PgDataStore::open(o, ec, &why);
  }
  // In the test's database, not the cluster's default one.
  std::string sql(const std::string& text) { return test_support::PgCluster::value_in(dsn_, text); }
  static std::unique_ptr<lock::LockContext> request(lock::LockService& s, const std::string& id) {
    return s.context({id, "POST", "/test/" + id, "192.0.2.1"});
  }

  test_support::TempDir dir_;
  test_support::PgCluster* pg_ = nullptr;
  std::string dsn_;
};

// A holder whose lock connection died (a host that froze and was cut off) cannot commit: the
// lock is taken over, the new holder's write stays, the stale one is refused.
TEST_F(PgDataStoreTest, AHolderWhoseLockConnectionDiedCommitsNothing) {
  auto locks_a = lock::LockService::create(lock_options("a"));
  auto locks_b = lock::LockService::create(lock_options("b"));
  std::error_code ec;
  std::string why;
  auto data_a = open(locks_a->options(), true, ec, why);
  auto data_b = open(locks_b->options(), true, ec, why);
  ASSERT_TRUE(data_a && data_b) << why;

  auto stale = request(*locks_a, "stale");
  auto g = stale->exclusive("t/fence");
  ASSERT_TRUE(data_a->commit(g, "t/fence.txt", "old").ok());
  const std::string pid =
      sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'kagi/a/1' AND state = 'idle' "
          "LIMIT 1");
  ASSERT_FALSE(pid.empty());
  EXPECT_EQ(sql("SELECT pg_terminate_backend(" + pid + ")"), "t");  // the lock is free now
  {
    auto fresh = request(*locks_b, "fresh");
    auto g2 = fresh->exclusive("t/fence", 2000ms);
    ASSERT_TRUE(data_b->commit(g2, "t/fence.txt", "new").ok());
  }
  Status s = data_a->commit(g, "t/fence.txt", "stale write");
  EXPECT_EQ(s.code(), lock::Errc::kFenceLost) << s.message();
  EXPECT_EQ(sql("SELECT convert_from(bytes, 'UTF8') FROM kagi_files WHERE path = 't/fence.txt'"),
            "new");
}

// With the data on its own connections (locks elsewhere), the epoch stamp is the fence: a
// writer whose epoch is older than one that already wrote under the lock is refused, in the
// same transaction as its write.
TEST_F(PgDataStoreTest, AWriterOlderThanTheLastStampedEpochIsRefused) {
  auto locks = lock::LockService::create(lock_options("a"));
  std::error_code ec;
  std::string why;
  auto data = open(locks->options(), false, ec, why);
  ASSERT_TRUE(data) << why;
  auto r = request(*locks, "w");
  auto g = r->exclusive("t/stamp");
  ASSERT_TRUE(lock::epoch_is_ordered(g.epoch()));
  ASSERT_TRUE(data->commit(g, "t/stamp.txt", "mine").ok());
  EXPECT_EQ(sql("SELECT epoch FROM kagi_fences WHERE lock_name = 't/stamp'"),
            std::to_string(g.epoch()));
  // What a newer holder leaves behind when it writes:
  sql("UPDATE kagi_fences SET epoch = epoch + 1000 WHERE lock_name = 't/stamp'");
  Status s = data->commit(g, "t/stamp.txt", "stale");
  EXPECT_EQ(s.code(), lock::Errc::kFenceLost) << s.message();
  EXPECT_NE(s.message().find("newer holder"), std::string::npos) << s.message();
  s = data->append(g, "t/stamp.log", "stale");
  EXPECT_EQ(s.code(), lock::Errc::kFenceLost) << s.message();
  EXPECT_EQ(sql("SELECT convert_from(bytes, 'UTF8') FROM kagi_files WHERE path = 't/stamp.txt'"),
            "mine");
  EXPECT_EQ(sql("SELECT count(*) FROM kagi_log_records WHERE path = 't/stamp.log'"), "0");
}

TEST_F(PgDataStoreTest, TheSchemaIsMadeOnceAndANewerOneIsRefused) {
  auto locks = lock::LockService::create(lock_options("a"));
  std::error_code ec;
  std::string why;
  ASSERT_TRUE(open(locks->options(), true, ec, why)) << why;
  ASSERT_TRUE(open(locks->options(), true, ec, why)) << why;  // already there: nothing to do
  EXPECT_EQ(sql("SELECT version FROM kagi_schema_version"),
            std::to_string(PgDataStore::kSchemaVersion));
  sql("UPDATE kagi_schema_version SET version = 99");
  EXPECT_FALSE(open(locks->options(), true, ec, why));
  EXPECT_EQ(ec, Errc::kDatabase);
  EXPECT_NE(why.find("newer than this kagi"), std::string::npos) << why;
}

// The split-brain guard of the files store, for data in PostgreSQL: a process locking in
// another domain (local locks of some host) is refused, unless it adopts the data on purpose.
TEST_F(PgDataStoreTest, AnotherLockDomainIsRefusedUnlessAdopted) {
  auto locks = lock::LockService::create(lock_options("a"));
  std::error_code ec;
  std::string why;
  ASSERT_TRUE(open(locks->options(), true, ec, why)) << why;
  lock::LockOptions local;
  local.dir = dir_.path() + "/other-locks";
  EXPECT_FALSE(open(local, false, ec, why));
  EXPECT_EQ(ec, Errc::kForeignLockDomain);
  EXPECT_NE(why.find("lose updates"), std::string::npos) << why;
  PgDataOptions o;
  o.connect.dsn = dsn_;
  o.lock_domain = lock::lock_domain(local);
  o.adopt_lock_domain = true;
  EXPECT_TRUE(PgDataStore::open(o, ec, &why)) << why;
  EXPECT_EQ(sql("SELECT domain FROM kagi_lock_domain"), lock::lock_domain(local));
}

// A DBA may create the tables with one role and give the site's role only these objects (no
// CREATE on the schema): kagi still starts, locks with ordered epochs and writes. A role given
// nothing is refused at start, saying why.
TEST_F(PgDataStoreTest, ARoleGivenOnlyItsTablesStartsAndWrites) {
  {
    auto owner = lock::LockService::create(lock_options("owner"));
    std::error_code ec;
    std::string why;
    ASSERT_TRUE(open(owner->options(), true, ec, why)) << why;
    auto r = request(*owner, "make");
    auto g = r->exclusive("t/made");  // the lock backend makes its table and sequence
  }
  const std::string role = "kagi_site_" + std::to_string(::getpid());
  const std::string nobody = "kagi_nobody_" + std::to_string(::getpid());
  sql("CREATE ROLE " + role + " LOGIN; CREATE ROLE " + nobody + " LOGIN; " +
      "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + role + "; " +
      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO " + role + "; " +
      "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
  const std::string owner_dsn = dsn_;
  dsn_.replace(dsn_.find("user=kagi"), 9, "user=" + role);
  auto locks = lock::LockService::create(lock_options("site"));
  std::error_code ec;
  std::string why;
  auto data = open(locks->options(), true, ec, why);
  ASSERT_TRUE(data) << why;
  {
    auto r = request(*locks, "w");
    auto g = r->exclusive("t/limited");
    EXPECT_TRUE(lock::epoch_is_ordered(g.epoch()));
    ASSERT_TRUE(data->append(g, "t/limited.log", "written").ok());
    EXPECT_EQ(data->read_log(g, "t/limited.log").value(), std::vector<std::string>{"written"});
  }
  dsn_ = owner_dsn;
  dsn_.replace(dsn_.find("user=kagi"), 9, "user=" + nobody);
  EXPECT_FALSE(open(locks->options(), false, ec, why));
  EXPECT_EQ(ec, Errc::kDatabase);
  EXPECT_NE(why.find("permission denied"), std::string::npos) << why;
}

// A server that is down is "unavailable" (the app answers 503), at once rather than after a
// hang, and the store works again once it is back.
TEST_F(PgDataStoreTest, AServerThatIsDownIsUnavailableThenServesAgain) {
  lock::LockOptions local;
  local.dir = dir_.path() + "/locks";
  auto locks = lock::LockService::create(local);  // locks elsewhere: the store's own pool
  std::error_code ec;
  std::string why;
  auto data = open(locks->options(), false, ec, why);
  ASSERT_TRUE(data) << why;
  auto r = request(*locks, "r");
  auto g = r->exclusive("t/down");
  ASSERT_TRUE(data->commit(g, "t/down.txt", "before").ok());
  pg_->stop();
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::string> read = data->read(g, "t/down.txt");
  EXPECT_EQ(read.status().code(), Errc::kUnavailable) << read.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2500ms);  // bounded by the store's timeout
  pg_->start();
  Result<std::string> again = data->read(g, "t/down.txt");
  for (auto until = std::chrono::steady_clock::now() + 5s;
       !again.ok() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(100ms);  // the pool fails fast for a moment after a failure
    again = data->read(g, "t/down.txt");
  }
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again.value(), "before");
}

}  // namespace
}  // namespace kagi::store
