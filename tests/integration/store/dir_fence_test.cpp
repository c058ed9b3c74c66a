// Fencing of data in files under dir locks, across real processes: a writer that stopped
// (SIGSTOP stands for a hung process, a swapped-out VM, a long GC-like pause) while holding its
// lock loses it once its lease lapses unrenewed, another process takes it over and writes, and
// when the stopped writer wakes, its commit and its append are refused (the fence is checked
// right before each becomes visible): the data holds only the new holder's writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>
#include "../../support/child_process.hpp"

namespace kagi::store {
namespace {

using test_support::wait_exit;
using namespace std::chrono_literals;

constexpr auto kLease = 300ms;

class DirFenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-dirfence-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  // One process's locks and data; `host` plays its host (a stopped process on another host
  // can only be seen by its lease, so this is the case to prove).
  struct Site {
    std::unique_ptr<lock::LockService> locks;
    std::unique_ptr<DataDir> data;
  };
  Site open_site(const std::string& host) {
    lock::LockOptions lo;
    lo.backend = "dir";
    lo.dir = root_ + "/locks";
    lo.dir_host_id = host;
    lo.dir_lease = kLease;
    lo.dir_max_clock_skew = 60s;  // only the unrenewed lease may declare it stale
    lo.timeout = 20s;
    lo.registry = false;
    Site site;
    site.locks = lock::LockService::create(lo);
    std::error_code ec;
    site.data = DataDir::open({.dir = root_ + "/data"}, ec);
    if (!site.data) throw std::runtime_error("cannot open data: " + ec.message());
    return site;
  }
  std::string root_;
};

TEST_F(DirFenceTest, AStoppedWritersCommitAndAppendAreRefusedAfterATakeover) {
  // The fencing tokens (the guards' epochs) of the three holders, in the order they held the
  // lock: ordered, and strictly increasing.
  uint64_t setup_epoch = 0, next_epoch = 0;
  const std::string stale_epoch_file = root_ + "/stale.epoch";
  {
    Site setup = open_site("setup");
    auto ctx = setup.locks->context({"setup", "POST", "/x", ""});
    auto g = ctx->exclusive("fence/board");
    setup_epoch = g.epoch();
    ASSERT_TRUE(setup.data->commit(g, "board.txt", "v0").ok());
    ASSERT_TRUE(setup.data->append(g, "board.log", "r0").ok());
  }
  test_support::PausingChild stale([&](const test_support::PausingChild::Pause& pause) {
    Site site = open_site("stale");
    auto ctx = site.locks->context({"stale", "POST", "/board", ""});
    auto g = ctx->exclusive("fence/board");
    if (FILE* f = std::fopen(stale_epoch_file.c_str(), "w")) {
      std::fprintf(f, "%llu\n", static_cast<unsigned long long>(g.epoch()));
      std::fclose(f);
    }
    const std::string read = site.data->read(g, "board.txt").value();  // lock, read...
    if (read != "v0" || !pause()) return 2;
    // ...stopped here, then woken: the writes of a holder that lost its lock.
    Status commit = site.data->commit(g, "board.txt", read + " + stale write");
    Status append = site.data->append(g, "board.log", "stale record");
    std::fprintf(stderr, "stale writer: commit %s; append %s\n",
                 commit.ok() ? "applied" : commit.message().c_str(),
                 append.ok() ? "applied" : append.message().c_str());
    return commit.code() == lock::Errc::kFenceLost && append.code() == lock::Errc::kFenceLost ? 0
                                                                                              : 1;
  });
  ASSERT_TRUE(stale.wait_paused());
  ASSERT_EQ(::kill(stale.pid(), SIGSTOP), 0);

  // The takeover: the next writer waits until the stopped holder's record went a whole lease
  // without a renewal, removes it, and writes.
  const auto asked = std::chrono::steady_clock::now();
  {
    Site next = open_site("next");
    auto ctx = next.locks->context({"next", "POST", "/board", ""});
    auto g = ctx->exclusive("fence/board", 10s);
    next_epoch = g.epoch();
    const auto took = std::chrono::steady_clock::now() - asked;
    std::printf(
        "  taken over %lld ms after the holder stopped (lease %lld ms)\n",
        static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
        static_cast<long long>(kLease.count()));
    EXPECT_GE(took, kLease);  // never before the lease ran out unrenewed
    const std::string read = next.data->read(g, "board.txt").value();
    ASSERT_TRUE(next.data->commit(g, "board.txt", read + " + new write").ok());
    ASSERT_TRUE(next.data->append(g, "board.log", "r1").ok());
  }

  ASSERT_EQ(::kill(stale.pid(), SIGCONT), 0);
  ASSERT_TRUE(stale.resume());
  EXPECT_EQ(wait_exit(stale.pid()), 0) << "the woken writer's commit or append was not refused";
  unsigned long long stale_epoch = 0;
  if (FILE* f = std::fopen(stale_epoch_file.c_str(), "r")) {
    if (std::fscanf(f, "%llu", &stale_epoch) != 1) stale_epoch = 0;
    std::fclose(f);
  }
  std::printf("  fencing tokens in grant order: %llu, %llu (stopped), %llu\n",
              static_cast<unsigned long long>(setup_epoch), stale_epoch,
              static_cast<unsigned long long>(next_epoch));
  EXPECT_TRUE(lock::epoch_is_ordered(setup_epoch));
  EXPECT_TRUE(lock::epoch_is_ordered(stale_epoch));
  EXPECT_TRUE(lock::epoch_is_ordered(next_epoch));
  EXPECT_LT(setup_epoch, stale_epoch);
  EXPECT_LT(stale_epoch, next_epoch);
  Site check = open_site("check");
  auto ctx = check.locks->context({"check", "GET", "/board", ""});
  auto g = ctx->shared("fence/board");
  EXPECT_EQ(check.data->read(g, "board.txt").value(), "v0 + new write");
  EXPECT_EQ(check.data->read_log(g, "board.log").value(), (std::vector<std::string>{"r0", "r1"}));
}

}  // namespace
}  // namespace kagi::store
