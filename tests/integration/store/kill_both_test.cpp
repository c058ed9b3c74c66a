// Crash safety, the same on both DataStores: a writer appending under its lock is SIGKILLed at
// a random moment, again and again; afterwards the log holds exactly the records 1..m, each
// once, m being every acknowledged record and at most one more (the one in flight). On files
// this is the torn-tail recovery of store_crash; on PostgreSQL, one transaction per append.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_domain.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/pg_data_store.hpp>
#include "../../support/child_process.hpp"
#include "../../unit/support/pg_cluster.hpp"
#include "../../unit/support/temp_dir.hpp"

namespace kagi::store {
namespace {

using namespace std::chrono_literals;

class KillBothTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgres") {
      KAGI_NEED_POSTGRES(pg);
      dsn_ = pg->fresh_database_dsn();
    }
  }
  // A process's locks and store, opened after fork (never shared with a parent).
  struct Site {
    std::unique_ptr<lock::LockService> locks;
    std::unique_ptr<DataStore> data;
  };
  Site open_site() {
    lock::LockOptions lo;
    lo.dir = dir_.path() + "/locks";
    lo.timeout = 10s;
    Site site;
    std::error_code ec;
    if (GetParam() == "files") {
      site.locks = lock::LockService::create(lo);
      site.data = DataDir::open({.dir = dir_.path() + "/data", .fsync = false}, ec);
    } else {
      lo.backend = "postgres";
      lo.postgres.dsn = dsn_;
      site.locks = lock::LockService::create(lo);
      PgDataOptions o;
      o.connect.dsn = dsn_;
      o.on_lock_connection = true;
      o.fsync = false;
      o.lock_domain = lock::lock_domain(lo);
      std::string why;
      site.data = PgDataStore::open(o, ec, &why);
    }
    if (!site.data) throw std::runtime_error("cannot open the store: " + ec.message());
    return site;
  }
  std::vector<std::string> records() {
    Site site = open_site();
    auto ctx = site.locks->context({"check", "GET", "/", ""});
    auto g = ctx->shared("kill/log");
    return site.data->read_log(g, "kill/a.log").value();
  }

  test_support::TempDir dir_;
  std::string dsn_;
};

TEST_P(KillBothTest, AKilledWritersLogHoldsEveryAcknowledgedRecordOnce) {
  (void)open_site();  // the schema exists before any child races to make it
  std::mt19937 rng(42);
  int acked_total = 0;
  for (int round = 0; round < 20; ++round) {
    int acks[2];
    ASSERT_EQ(::pipe(acks), 0);
    const int start = static_cast<int>(records().size());
    pid_t child = test_support::spawn([&] {
      ::close(acks[0]);
      Site site = open_site();
      for (int n = start + 1;; ++n) {
        auto ctx = site.locks->context({"writer", "POST", "/", ""});
        auto g = ctx->exclusive("kill/log");
        if (!site.data->append(g, "kill/a.log", std::to_string(n)).ok()) return 1;
        if (::write(acks[1], &n, sizeof n) != sizeof n) return 2;
      }
    });
    ::close(acks[1]);
    int last = start, n = 0;
    // Wait for a few acknowledgements, then kill at a random moment of the next append.
    while (last < start + 5 && ::read(acks[0], &n, sizeof n) == sizeof n) last = n;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    ::kill(child, SIGKILL);
    while (::read(acks[0], &n, sizeof n) == sizeof n) last = n;  // acks sent before the kill
    ::close(acks[0]);
    EXPECT_EQ(test_support::wait_exit(child), 128 + SIGKILL);
    const std::vector<std::string> got = records();
    ASSERT_GE(got.size(), static_cast<size_t>(last)) << "an acknowledged record was lost";
    ASSERT_LE(got.size(), static_cast<size_t>(last) + 1) << "more than the one in flight";
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], std::to_string(i + 1)) << "record " << i << " of round " << round;
    }
    acked_total = last;
  }
  std::printf("%s: 20 kills, %d acknowledged records, none lost or repeated\n", GetParam().c_str(),
              acked_total);
}

INSTANTIATE_TEST_SUITE_P(Backends, KillBothTest, ::testing::Values("files", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kagi::store
