// Fencing of data on PostgreSQL across real processes: a writer that stopped (SIGSTOP stands
// for a hung or partitioned host) while holding its lock is cut off by the server, another
// process takes the lock over and writes, and when the stopped writer wakes its commit is
// refused: the data holds only the new holder's write. Run with the data on the lock's
// connection (by construction) and on connections of its own (verify + epoch stamp).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_domain.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/pg_data_store.hpp>
#include "../../support/child_process.hpp"
#include "../../unit/support/pg_cluster.hpp"

namespace kagi::store {
namespace {

using test_support::wait_exit;

using namespace std::chrono_literals;

class PgFenceTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    KAGI_NEED_POSTGRES(pg);
    pg_ = pg;
    dsn_ = pg_->fresh_database_dsn();
  }

  // One process's lock service and store.
  struct Site {
    std::unique_ptr<lock::LockService> locks;
    std::unique_ptr<PgDataStore> data;
  };
  Site open_site(const std::string& host) {
    lock::LockOptions lo;
    lo.backend = "postgres";
    lo.timeout = 20s;
    lo.dir = "/tmp";
    lo.postgres.dsn = dsn_;
    lo.postgres.application_name = "kagi/" + host + "/1";
    Site site;
    site.locks = lock::LockService::create(lo);
    PgDataOptions o;
    o.connect.dsn = dsn_;
    o.on_lock_connection = GetParam();
    o.lock_domain = lock::lock_domain(lo);
    std::error_code ec;
    std::string why;
    site.data = PgDataStore::open(o, ec, &why);
    if (!site.data) throw std::runtime_error("cannot open the store: " + why);
    return site;
  }
  std::string sql(const std::string& text) { return test_support::PgCluster::value_in(dsn_, text); }

  test_support::PgCluster* pg_ = nullptr;
  std::string dsn_;
};

TEST_P(PgFenceTest, AStoppedWritersCommitIsRefusedAndOnlyTheNewHoldersWriteStays) {
  {
    Site setup = open_site("setup");  // the tables exist before the children fork
    auto ctx = setup.locks->context({"setup", "POST", "/x", ""});
    auto g = ctx->exclusive("fence/board");
    ASSERT_TRUE(setup.data->commit(g, "fence/board.txt", "v0").ok());
  }
  test_support::PausingChild stale([&](const test_support::PausingChild::Pause& pause) {
    Site site = open_site("stale");
    auto ctx = site.locks->context({"stale", "POST", "/board", ""});
    auto g = ctx->exclusive("fence/board");
    const std::string read = site.data->read(g, "fence/board.txt").value();  // lock, read...
    if (read != "v0" || !pause()) return 2;
    // ...stopped here, then woken: the write of a holder that lost its lock.
    Status s = site.data->commit(g, "fence/board.txt", read + " + stale write");
    std::fprintf(stderr, "stale writer: %s\n", s.ok() ? "committed" : s.message().c_str());
    // Refused for certain: the closed connection is seen before anything is sent.
    const bool certain = s.message().find("may or may not") == std::string::npos;
    return s.code() == lock::Errc::kFenceLost && certain ? 0 : 1;
  });
  ASSERT_TRUE(stale.wait_paused());
  ASSERT_EQ(::kill(stale.pid(), SIGSTOP), 0);

  // The takeover: the stopped holder's session is ended (by hand here; for a vanished host
  // the keepalive bound does it), and the next writer gets the lock.
  const std::string pid =
      sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'kagi/stale/1' AND "
          "backend_type = 'client backend' AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = "
          "pg_stat_activity.pid AND l.locktype = 'advisory' AND l.granted)");
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(sql("SELECT pg_terminate_backend(" + pid + ")"), "t");
  {
    Site next = open_site("next");
    auto ctx = next.locks->context({"next", "POST", "/board", ""});
    auto g = ctx->exclusive("fence/board", 10s);
    const std::string read = next.data->read(g, "fence/board.txt").value();
    ASSERT_TRUE(next.data->commit(g, "fence/board.txt", read + " + new write").ok());
  }

  ASSERT_EQ(::kill(stale.pid(), SIGCONT), 0);
  ASSERT_TRUE(stale.resume());
  EXPECT_EQ(wait_exit(stale.pid()), 0) << "the woken writer's commit was not refused";
  EXPECT_EQ(sql("SELECT convert_from(bytes, 'UTF8') FROM kagi_files WHERE path = "
                "'fence/board.txt'"),
            "v0 + new write");
}

INSTANTIATE_TEST_SUITE_P(DataConnections, PgFenceTest, ::testing::Values(true, false),
                         [](const auto& info) {
                           return std::string(info.param ? "OnTheLockConnection" : "OwnPool");
                         });

}  // namespace
}  // namespace kagi::store
