// Group commit (data.fsync = "always" inside a DurableScope): appends share fsyncs, no append
// is acknowledged before it is durable, and no read shows a record a power cut could lose.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/detail/journal_format.hpp>
#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/durable_scope.hpp>
#include <kagi/store/fault_fs.hpp>
#include "forwarding_fs.hpp"
#include "power_cut_fs.hpp"
#include "slow_sync_fs.hpp"

namespace kagi::store {
namespace {

namespace fs = std::filesystem;
using testing::PowerCutFs;
using testing::SlowSyncFs;

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-group-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    lock::LockOptions lo;
    lo.dir = (root_ / "locks").string();
    lo.timeout = std::chrono::milliseconds(10000);
    service_ = lock::LockService::create(lo);
  }
  void TearDown() override {
    service_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<lock::LockContext> context(const std::string& who) {
    lock::HolderInfo info;
    info.request_id = who;
    return service_->context(info);
  }
  // With `journal` off, a round flushes the logs themselves (fsync each, or one syncfs).
  std::unique_ptr<DataDir> open(FileSystem& fsys, const std::string& sub, bool fsync = true,
                                size_t syncfs_min_files = 0, bool journal = true,
                                uint64_t journal_kb = 8192) {
    std::error_code ec;
    auto dir = DataDir::open(DataOptions{.dir = (root_ / sub).string(),
                                         .fsync = fsync,
                                         .syncfs_min_files = syncfs_min_files,
                                         .journal = journal,
                                         .journal_kb = journal_kb},
                             fsys, ec);
    EXPECT_TRUE(dir) << ec.message();
    return dir;
  }

  // The records of `log`, read as a reader does (under the shared lock), asserting the read
  // works.
  std::vector<std::string> records(DataDir& dir, const std::string& log) {
    auto reader = context("r");
    auto g = reader->shared("board");
    auto read = dir.read_log(g, log);
    EXPECT_TRUE(read.ok()) << log << ": " << read.status().message();
    return read.ok() ? read.value() : std::vector<std::string>{};
  }

  fs::path root_;
  std::unique_ptr<lock::LockService> service_;
};

// One request, as the App runs it: scope, lock, append, unlock, then wait: blocking, or (as
// the App does) through the flush thread, this thread only waiting for the callback here.
Status post(DataDir& dir, lock::LockContext& ctx, const std::string& log, const std::string& rec,
            bool async = false) {
  DurableScope durable;
  {
    // As the apps post: read what the log holds, then append, under one exclusive guard (the
    // append takes the descriptor the read opened, store/detail/kept_log.hpp).
    auto g = ctx.exclusive("board");
    LogCursor cursor;
    if (Result<LogTail> read = dir.read_log_since(g, log, cursor); !read.ok()) {
      return read.status();
    }
    if (Status s = dir.append(g, log, rec); !s.ok()) return s;
  }
  ctx.end_request();
  if (!async) return durable.wait();
  std::promise<Status> answer;
  std::future<Status> got = answer.get_future();
  durable.wait_async([&answer](Status s) { answer.set_value(s); });
  return got.get();
}

TEST_F(GroupCommitTest, WritersToOneLogShareFsyncsAndEveryRecordIsKept) {
  SlowSyncFs slow;
  auto dir = open(slow, "data");
  constexpr int kThreads = 8, kPosts = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto ctx = context("w" + std::to_string(t));
      for (int i = 0; i < kPosts; ++i) {
        const std::string rec = std::to_string(t) + "-" + std::to_string(i);
        if (!post(*dir, *ctx, "board.log", rec, t % 2 == 1).ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto ctx = context("reader");
  auto g = ctx->shared("board");
  const auto records = dir->read_log(g, "board.log").value();
  EXPECT_EQ(records.size(), size_t{kThreads * kPosts});
  EXPECT_EQ(std::set<std::string>(records.begin(), records.end()).size(), records.size());
  // One fsync per post would be 320 (plus the log's creation); while one flush runs (3 ms)
  // the other writers append and queue behind it, so far fewer are made.
  std::printf("group commit: %d posts by %d threads, %d fsyncs\n", kThreads * kPosts, kThreads,
              slow.fsyncs());
  EXPECT_LT(slow.fsyncs(), kThreads * kPosts / 2);
}

TEST_F(GroupCommitTest, TheLockIsFreeWhileTheAnswerWaitsForItsFlush) {
  SlowSyncFs slow;
  auto dir = open(slow, "data");
  auto first = context("first");
  ASSERT_TRUE(post(*dir, *first, "board.log", "created").ok());  // a new log syncs at once
  slow.hold();
  std::atomic<bool> answered{false};
  std::thread writer([&] {
    EXPECT_TRUE(post(*dir, *first, "board.log", "held").ok());
    answered = true;
  });
  ASSERT_TRUE(slow.wait_for_held_sync());
  // The flush is stuck, so the writer has no answer yet...
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(answered.load());
  // ...but its lock is free: another request takes it at once and reads the log. Its own
  // answer may not show "held" before that record is durable, so its wait blocks too.
  auto other = context("other");
  std::atomic<bool> reader_done{false};
  std::thread reader([&] {
    DurableScope durable;
    std::vector<std::string> seen;
    {
      auto g = other->exclusive("board", std::chrono::milliseconds(100));
      seen = dir->read_log(g, "board.log").value();
    }
    other->end_request();
    EXPECT_TRUE(durable.wait().ok());
    EXPECT_EQ(seen.back(), "held");
    reader_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(reader_done.load());
  slow.release();
  writer.join();
  reader.join();
  EXPECT_TRUE(answered.load());
  EXPECT_TRUE(reader_done.load());
}

// Once rounds have served several requests each, a round waits a little (as long as a flush has
// lately taken, at most DataOptions::group_max_batch_wait) for more to join before it flushes:
// two posts 0.3 ms apart share one fsync. Without the wait the first post's round would already
// be in its 3 ms flush when the second came, and each would pay for one. (The cap is raised
// from 1 ms to 5 s here, so that the window is the flushes' own ~40 ms, far above the gap even
// under a sanitizer.)
TEST_F(GroupCommitTest, ARoundWaitsForMoreRequestsWhileSeveralThreadsPost) {
  SlowSyncFs slow;
  std::error_code ec;
  auto dir = DataDir::open(DataOptions{.dir = (root_ / "data").string(),
                                       .group_max_batch_wait = std::chrono::seconds(5)},
                           slow, ec);
  ASSERT_TRUE(dir) << ec.message();
  auto a = context("a"), b = context("b"), c = context("c");
  ASSERT_TRUE(post(*dir, *a, "board.log", "created").ok());  // a new log syncs at once
  // A round of one request (held), then a round of the two that came meanwhile.
  const StoreStats start = dir->store_stats();
  slow.hold();
  std::thread first([&] { EXPECT_TRUE(post(*dir, *a, "board.log", "1", true).ok()); });
  ASSERT_TRUE(slow.wait_for_held_sync());
  std::thread second([&] { EXPECT_TRUE(post(*dir, *b, "board.log", "2", true).ok()); });
  std::thread third([&] { EXPECT_TRUE(post(*dir, *c, "board.log", "3", true).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both wait for the next round
  slow.release();
  first.join();
  second.join();
  third.join();
  // The statistics the admin page shows (store_stats.hpp) count them so.
  const StoreStats rounds = dir->store_stats();
  EXPECT_EQ(rounds.rounds - start.rounds, 2u);
  EXPECT_EQ(rounds.round_requests - start.round_requests, 3u);
  EXPECT_GE(rounds.round_flush_us - start.round_flush_us, 50'000u) << "the held flush's 50 ms";
  EXPECT_EQ(rounds.flushes - start.flushes, 2u);
  // Now two posts, the second 0.3 ms after the first was submitted.
  const uint64_t before = dir->store_stats().flushes;
  std::thread fourth([&] { EXPECT_TRUE(post(*dir, *a, "board.log", "4", true).ok()); });
  std::this_thread::sleep_for(std::chrono::microseconds(300));
  EXPECT_TRUE(post(*dir, *b, "board.log", "5", true).ok());
  fourth.join();
  EXPECT_EQ(dir->store_stats().flushes - before, 1u) << "the two posts did not share a round";
}

// The admin page reads these counters every quarter second (stats/host_stats.hpp): they must
// not wait for a round's flush. The journal holds its own lock across its fdatasync (and a
// checkpoint's syncfs), so its checkpoint count is read without it.
TEST_F(GroupCommitTest, ItsCountersAnswerWhileAJournalRoundFlushes) {
  SlowSyncFs slow;
  auto dir = open(slow, "j");
  ASSERT_TRUE(dir);
  auto a = context("a");
  ASSERT_TRUE(post(*dir, *a, "board.log", "created").ok());  // a new log syncs at once
  slow.hold();
  std::thread writer([&] { EXPECT_TRUE(post(*dir, *a, "board.log", "1", true).ok()); });
  ASSERT_TRUE(slow.wait_for_held_sync());
  auto counted = std::async(std::launch::async, [&] { return dir->store_stats(); });
  EXPECT_EQ(counted.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the counters waited for the journal's flush";
  slow.release();
  writer.join();
  EXPECT_EQ(dir->store_stats().journal_rounds, 1u);
}

TEST_F(GroupCommitTest, AFailedFlushFailsEveryRequestWaitingForIt) {
  // (Through the flush thread, then blocking.)
  FaultFs faulty;
  auto dir = open(faulty, "data");
  auto ctx = context("w");
  ASSERT_TRUE(post(*dir, *ctx, "board.log", "created").ok());
  faulty.fail_nth(FaultFs::Op::kFsync, 1, EIO);
  const Status s = post(*dir, *ctx, "board.log", "lost", true);
  EXPECT_FALSE(s.ok()) << "the flush thread's failure reaches its request";
  EXPECT_NE(s.message().find("fsync"), std::string::npos) << s.message();
  // The kernel may have dropped the record with the pages it could not write, and the next
  // fsync would not say so: the log takes no more records...
  const Status later = post(*dir, *ctx, "board.log", "refused");
  EXPECT_FALSE(later.ok());
  EXPECT_NE(later.message().find("an earlier fsync"), std::string::npos) << later.message();
  // ... and a reader is never shown the record that was not made durable: its answer fails.
  DurableScope durable;
  {
    auto g = ctx->shared("board");
    EXPECT_EQ(dir->read_log(g, "board.log").value().size(), 2u);
  }
  ctx->end_request();
  EXPECT_FALSE(durable.wait().ok());
}

// An append outside a request flushes at once; when that fsync fails, the log is marked failed
// as by a group round: records other requests wrote may have gone with the unwritten pages.
TEST_F(GroupCommitTest, WithoutAScopeAFailedFsyncMarksTheLogFailed) {
  FaultFs faulty;
  auto dir = open(faulty, "data");
  auto ctx = context("tool");
  auto g = ctx->exclusive("board");
  ASSERT_TRUE(dir->append(g, "board.log", "one").ok());
  faulty.fail_nth(FaultFs::Op::kFsync, 1, EIO);
  EXPECT_FALSE(dir->append(g, "board.log", "two").ok());
  const Status three = dir->append(g, "board.log", "three");
  EXPECT_FALSE(three.ok()) << "the fsync would succeed now";
  EXPECT_NE(three.message().find("an earlier fsync"), std::string::npos) << three.message();
  EXPECT_TRUE(dir->append(g, "other.log", "one").ok());
  // A rewrite (a compaction, a delete) puts another file at the path, written from memory and
  // flushed before it takes the path: appends to it go on.
  ASSERT_TRUE(dir->rewrite_log(g, "board.log", {"one"}).ok());
  EXPECT_TRUE(dir->append(g, "board.log", "four").ok());
  EXPECT_EQ(dir->read_log(g, "board.log").value(), (std::vector<std::string>{"one", "four"}));
}

TEST_F(GroupCommitTest, WithoutAScopeAnAppendIsDurableWhenItReturns) {
  PowerCutFs power;
  auto dir = open(power, "data");
  auto ctx = context("tool");
  auto g = ctx->exclusive("board");
  ASSERT_TRUE(dir->append(g, "board.log", "one").ok());
  ASSERT_TRUE(dir->append(g, "board.log", "two").ok());
  struct stat st {};
  ASSERT_EQ(::stat((root_ / "data" / "board.log").c_str(), &st), 0);
  const auto kept = power.durable(st);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->size(), static_cast<size_t>(st.st_size));
}

// What one power-cut trial saw: what was acknowledged, what was shown to a reader.
struct Trial {
  std::mutex mu;
  std::set<std::string> acked, shown;
};

// The power cut: every file below `folder` (logs and journals) holds what its last completed
// flush kept; a file never flushed is empty.
void cut_power(const PowerCutFs& power, const fs::path& folder) {
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (!entry.is_regular_file()) continue;
    struct stat st {};
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    const std::optional<std::string> kept = power.durable(st);
    std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << kept.value_or("");
  }
}

// A round over many logs of one filesystem makes one syncfs instead of an fsync per log, from
// data.syncfs_min_files logs on (below that, or with 0, an fsync each), and only while the
// kernel holds at most data.syncfs_max_dirty_kb of dirty data (4096 KiB by default) and says so.
TEST_F(GroupCommitTest, ARoundOverManyLogsMakesOneSyncfs) {
  struct Case {
    size_t min_files;
    int64_t dirty_bytes;
    uint64_t flushes;   // of the second round
    uint64_t declined;  // rounds that made an fsync each for too much dirty data
  };
  const Case cases[] = {
      {0, 0, 8, 0},
      {3, 0, 1, 0},
      {9, 0, 8, 0},
      {3, 4096 << 10, 1, 0},
      {3, (4096 + 1) << 10, 8, 1},
      {3, -ENOSYS, 8, 1},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string sub = "m" + std::to_string(n++);
    const std::string what =
        "min_files " + std::to_string(c.min_files) + ", dirty " + std::to_string(c.dirty_bytes);
    PowerCutFs power;
    auto dir = open(power, sub, true, c.min_files, false);
    ASSERT_TRUE(dir);
    auto ctx = context("w");
    for (int round = 0; round < 2; ++round) {  // the first round creates the logs
      if (round == 1) power.set_dirty_bytes(c.dirty_bytes);
      const uint64_t before = dir->store_stats().flushes;
      DurableScope durable;
      {
        auto g = ctx->exclusive("board");
        for (int l = 0; l < 8; ++l) {
          ASSERT_TRUE(dir->append(g, "log" + std::to_string(l) + ".log", "r").ok());
        }
      }
      ctx->end_request();
      ASSERT_TRUE(durable.wait().ok());
      if (round == 1) {
        EXPECT_EQ(dir->store_stats().flushes - before, c.flushes) << what;
        EXPECT_EQ(dir->store_stats().syncfs_declined, c.declined) << what;
      }
    }
    // What the round's flush kept holds each log's second record.
    for (int l = 0; l < 8; ++l) {
      struct stat st {};
      const fs::path log = root_ / sub / ("log" + std::to_string(l) + ".log");
      ASSERT_EQ(::stat(log.c_str(), &st), 0);
      const std::optional<std::string> kept = power.durable(st);
      ASSERT_TRUE(kept.has_value());
      std::ifstream in(log, std::ios::binary);
      const std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(*kept, now) << log;
    }
  }
}

// The real filesystem, with one log's write lost as a failing disk would: a syncfs through
// another file reports nothing (that error was reported once already, or the kernel is older
// than 5.8), and only the log's own descriptor says so.
class OneLostWriteFs final : public testing::ForwardingFs {
 public:
  int wait_writeback(int fd) override {
    if (testing::path_of_fd(fd).ends_with("/log3.log")) return -EIO;
    return real_fs().wait_writeback(fd);
  }
  int64_t dirty_bytes() override { return 0; }
};

// A round flushed by one syncfs still asks every log for its own write error: the request whose
// record went to the failed log is refused, the one that did not write there is answered.
TEST_F(GroupCommitTest, ASyncfsRoundFailsTheRequestsOfALogWhoseWriteFailed) {
  OneLostWriteFs lost;
  auto dir = open(lost, "lost", true, 3, false);
  ASSERT_TRUE(dir);
  auto ctx = context("w");
  auto append_to = [&](const std::vector<int>& logs) {
    DurableScope durable;
    {
      auto g = ctx->exclusive("board");
      for (int l : logs) {
        EXPECT_TRUE(dir->append(g, "log" + std::to_string(l) + ".log", "r").ok());
      }
    }
    ctx->end_request();
    return durable.wait();
  };
  ASSERT_TRUE(append_to({0, 1, 2, 4}).ok());  // makes the logs (each new one flushed at once)
  ASSERT_TRUE(append_to({3}).ok());           // flushed at once too: a new log
  const uint64_t before = dir->store_stats().flushes;
  const Status failed = append_to({0, 1, 2, 3});
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("log3.log"), std::string::npos) << failed.message();
  EXPECT_EQ(dir->store_stats().flushes - before, 1u) << "one syncfs for the round";
  EXPECT_TRUE(append_to({0, 1, 2, 4}).ok()) << "the other logs' writes were kept";
}

// A flush that fails marks its log: a request that wrote to it before the failure was known but
// waits in a later round is refused although that round's fsync succeeds (the kernel may have
// dropped its record with the pages it could not write), later appends are refused, and so is a
// read of what was never made durable. Other logs go on.
TEST_F(GroupCommitTest, AfterAFailedFlushNothingWrittenToTheLogIsCalledDurable) {
  SlowSyncFs failing;  // fails one fsync of board.log, as the kernel reports an error once
  auto dir = open(failing, "failed", true, 0, false);
  ASSERT_TRUE(dir);
  auto ctx_a = context("a"), ctx_b = context("b"), ctx_c = context("c");
  ASSERT_TRUE(post(*dir, *ctx_a, "board.log", "first").ok());
  ASSERT_TRUE(post(*dir, *ctx_a, "other.log", "first").ok());
  LogCursor durable_end;
  {
    auto g = ctx_c->shared("board");
    ASSERT_TRUE(dir->read_log_since(g, "board.log", durable_end).ok());
  }
  ctx_c->end_request();

  failing.hold("/board.log");
  failing.fail_next_held(EIO);
  auto a = std::async(std::launch::async, [&] { return post(*dir, *ctx_a, "board.log", "a"); });
  ASSERT_TRUE(failing.wait_for_held_sync());
  // b appends while a's round is flushing: it waits for the next round.
  std::promise<Status> b_answer;
  std::future<Status> b = b_answer.get_future();
  {
    DurableScope durable;
    {
      auto g = ctx_b->exclusive("board");
      ASSERT_TRUE(dir->append(g, "board.log", "b").ok());
    }
    ctx_b->end_request();
    durable.wait_async([&b_answer](Status s) { b_answer.set_value(s); });
  }
  failing.release();
  const Status a_status = a.get();
  EXPECT_FALSE(a_status.ok());
  const Status b_status = b.get();
  EXPECT_FALSE(b_status.ok()) << "b's flush succeeded, but its record was written before the "
                                 "failed one reported the error";
  EXPECT_NE(b_status.message().find("an earlier fsync"), std::string::npos) << b_status.message();
  EXPECT_NE(b_status.message().find("board.log"), std::string::npos) << b_status.message();

  const Status c_status = post(*dir, *ctx_c, "board.log", "c");
  EXPECT_FALSE(c_status.ok()) << "an append to the failed log";
  EXPECT_NE(c_status.message().find("an earlier fsync"), std::string::npos) << c_status.message();
  {
    auto g = ctx_c->shared("board");
    LogCursor cursor = durable_end;
    EXPECT_FALSE(dir->read_log_since(g, "board.log", cursor).ok())
        << "a and b were never made durable: no reader may be shown them";
  }
  ctx_c->end_request();
  EXPECT_TRUE(post(*dir, *ctx_c, "other.log", "second").ok()) << "another log goes on";
}

// 1,000 trials: writers post to three logs and readers read them under DurableScopes while the
// power goes at a random call; then every file is put back to what the last flushes kept, and
// the data folder is opened again (which replays the journal). Every acknowledged record and
// every record a reader was shown must be there. Half the trials write the journal, half flush
// the logs themselves; of each half, every other trial flushes a round of two logs or more with
// one syncfs instead of an fsync each.
TEST_F(GroupCommitTest, APowerCutNeverLosesAnAcknowledgedOrShownRecord) {
  std::mt19937 rng(20261127);
  constexpr int kTrials = 1000, kWriters = 3, kPosts = 4, kReaders = 2, kLogs = 3;
  const auto log_name = [](int i) { return "board" + std::to_string(i) + ".log"; };
  int cut_with_acks = 0;
  uint64_t restored = 0;  // journal entries replay wrote back
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string sub = "t" + std::to_string(trial);
    PowerCutFs power;
    const bool journal = (trial / 2) % 2 == 0;
    auto dir = open(power, sub, true, trial % 2 == 1 ? 2 : 0, journal);
    ASSERT_TRUE(dir);
    {
      auto setup = context("setup");
      auto g = setup->exclusive("board");
      for (int i = 0; i < kLogs; ++i) ASSERT_TRUE(dir->append(g, log_name(i), "first").ok());
    }
    power.cut_after(std::uniform_int_distribution<uint64_t>(1, 90)(rng));
    Trial seen;
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
      threads.emplace_back([&, w] {
        auto ctx = context("w");
        for (int i = 0; i < kPosts; ++i) {
          const std::string rec = std::to_string(w) + "-" + std::to_string(i);
          if (post(*dir, *ctx, log_name((w + i) % kLogs), rec, w % 2 == 1).ok()) {
            std::lock_guard lock(seen.mu);
            seen.acked.insert(rec);
          }
        }
      });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([&] {
        auto ctx = context("r");
        for (int i = 0; i < kPosts; ++i) {
          DurableScope durable;
          std::vector<std::string> got;
          bool read_all = true;
          {
            auto g = ctx->shared("board");
            for (int l = 0; l < kLogs; ++l) {
              auto records = dir->read_log(g, log_name((i + l) % kLogs));
              if (!records.ok()) {
                read_all = false;
                break;
              }
              got.insert(got.end(), records.value().begin(), records.value().end());
            }
          }
          ctx->end_request();
          if (read_all && durable.wait().ok()) {
            std::lock_guard lock(seen.mu);
            seen.shown.insert(got.begin(), got.end());
          }
        }
      });
    }
    for (auto& th : threads) th.join();

    dir.reset();
    cut_power(power, root_ / sub);
    auto after = open(real_fs(), sub, false);
    ASSERT_TRUE(after);
    restored += after->replayed().restored;
    std::set<std::string> survived;
    for (int l = 0; l < kLogs; ++l) {
      const auto kept = records(*after, log_name(l));
      survived.insert(kept.begin(), kept.end());
    }
    for (const auto& rec : seen.acked) {
      ASSERT_TRUE(survived.contains(rec))
          << "trial " << trial << ": acknowledged '" << rec << "' was lost in the power cut";
    }
    for (const auto& rec : seen.shown) {
      ASSERT_TRUE(survived.contains(rec))
          << "trial " << trial << ": '" << rec << "' was shown to a reader, then lost";
    }
    if (power.cut() && seen.acked.size() > 0) ++cut_with_acks;
    std::error_code ec;
    fs::remove_all(root_ / sub, ec);
  }
  // The cut must land mid-run often enough for the trials to mean something.
  EXPECT_GT(cut_with_acks, kTrials / 4);
  // And the journal must have been what kept records in some of them.
  EXPECT_GT(restored, 0u);
  std::printf(
      "power cut: %d trials, %d cut after some acknowledgements, %llu journal entries "
      "written back\n",
      kTrials, cut_with_acks, static_cast<unsigned long long>(restored));
}

// One request appending to `logs` as the apps do (DurableScope, lock, append, unlock, wait).
Status append_each(DataDir& dir, lock::LockContext& ctx, const std::vector<std::string>& logs,
                   const std::string& rec) {
  DurableScope durable;
  {
    auto g = ctx.exclusive("board");
    for (const std::string& log : logs) {
      if (Status s = dir.append(g, log, rec); !s.ok()) return s;
    }
  }
  ctx.end_request();
  return durable.wait();
}

std::vector<std::string> eight_logs() {
  std::vector<std::string> logs;
  for (int l = 0; l < 8; ++l) logs.push_back("log" + std::to_string(l) + ".log");
  return logs;
}

// With the journal, a round over eight logs makes one flush, of the journal: the logs' own
// flushed bytes lack the round's records, and opening the folder after a power cut puts them
// back from the journal.
TEST_F(GroupCommitTest, AJournalRoundFlushesOneFileForManyLogsAndReplayPutsTheirRecordsBack) {
  PowerCutFs power;
  auto dir = open(power, "j", true, 3);
  ASSERT_TRUE(dir);
  auto ctx = context("w");
  const auto logs = eight_logs();
  ASSERT_TRUE(append_each(*dir, *ctx, logs, "first").ok());  // new logs: each flushed at once
  const uint64_t flushes = dir->store_stats().flushes, fsyncs = power.fsyncs();
  ASSERT_TRUE(append_each(*dir, *ctx, logs, "second").ok());
  EXPECT_EQ(dir->store_stats().flushes - flushes, 1u);
  EXPECT_EQ(power.fsyncs() - fsyncs, 1u) << "one fdatasync of the journal, no fsync of a log";
  EXPECT_EQ(dir->store_stats().journal_rounds, 1u);
  for (const std::string& log : logs) {
    struct stat st {};
    ASSERT_EQ(::stat((root_ / "j" / log).c_str(), &st), 0);
    EXPECT_EQ(power.durable(st).value_or("").find("second"), std::string::npos)
        << log << ": the log itself was not flushed";
  }
  dir.reset();
  cut_power(power, root_ / "j");

  auto after = open(real_fs(), "j", false);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->replayed().restored, 8u);
  EXPECT_EQ(after->store_stats().replayed, 8u);
  for (const std::string& log : logs) {
    EXPECT_EQ(records(*after, log), (std::vector<std::string>{"first", "second"})) << log;
  }
}

// A journal left by a process that was killed (the machine kept running) is replayed by the
// next opening, which finds every entry in its log already and writes nothing; a log replaced
// since its entry was written is left as it is.
TEST_F(GroupCommitTest, ReplayWritesNothingTheLogsHoldAndLeavesAReplacedLogAlone) {
  {
    auto dir = open(real_fs(), "k");
    ASSERT_TRUE(dir);
    auto ctx = context("w");
    const auto logs = eight_logs();
    ASSERT_TRUE(append_each(*dir, *ctx, logs, "first").ok());
    ASSERT_TRUE(append_each(*dir, *ctx, logs, "second").ok());
    EXPECT_EQ(dir->store_stats().journal_rounds, 1u);
    auto g = ctx->exclusive("board");
    ASSERT_TRUE(dir->rewrite_log(g, "log0.log", {"compacted"}).ok());
  }
  auto after = open(real_fs(), "k", false);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->replayed().journals, 1u);
  EXPECT_EQ(after->replayed().entries, 8u);
  EXPECT_EQ(after->replayed().restored, 0u);
  EXPECT_EQ(after->replayed().skipped, 1u) << "log0.log was replaced";
  EXPECT_EQ(records(*after, "log0.log"), std::vector<std::string>{"compacted"});
  EXPECT_EQ(records(*after, "log1.log"), (std::vector<std::string>{"first", "second"}));
  // Replayed once: the next opening finds the journal empty.
  after.reset();
  auto again = open(real_fs(), "k", false);
  EXPECT_EQ(again->replayed().entries, 0u);
}

// A full journal makes every log durable with one syncfs and starts over in a new epoch; after
// a power cut only that epoch is replayed, and every acknowledged record is there.
TEST_F(GroupCommitTest, AFullJournalStartsOverAfterASyncfsAndKeepsEveryRecord) {
  PowerCutFs power;
  auto dir = open(power, "full", true, 3, true, /*journal_kb=*/8);
  ASSERT_TRUE(dir);
  auto ctx = context("w");
  constexpr int kPosts = 30;
  const std::string filler(1000, 'x');
  for (int i = 0; i < kPosts; ++i) {
    ASSERT_TRUE(append_each(*dir, *ctx, {"log" + std::to_string(i % 2) + ".log"},
                            std::to_string(i) + filler)
                    .ok());
  }
  EXPECT_GT(dir->store_stats().journal_checkpoints, 1u);
  EXPECT_GT(dir->store_stats().journal_rounds, 20u);
  dir.reset();
  cut_power(power, root_ / "full");
  auto after = open(real_fs(), "full", false);
  ASSERT_TRUE(after);
  EXPECT_LT(after->replayed().entries, 10u) << "older epochs are not replayed";
  std::set<std::string> kept;
  for (int l = 0; l < 2; ++l) {
    for (const std::string& rec : records(*after, "log" + std::to_string(l) + ".log")) {
      kept.insert(rec);
    }
  }
  for (int i = 0; i < kPosts; ++i) {
    EXPECT_TRUE(kept.contains(std::to_string(i) + filler)) << "post " << i << " was lost";
  }
}

// Two writers with journals of their own (as two processes have) take turns on one log: each
// journals the other's records it has not seen made durable along with its own, so replaying
// what survives a power cut leaves no hole before an acknowledged record.
TEST_F(GroupCommitTest, TwoJournalsTakingTurnsOnOneLogKeepEveryAcknowledgedRecord) {
  PowerCutFs power;
  auto a = open(power, "two");
  auto b = open(power, "two");
  ASSERT_TRUE(a && b);
  auto ctx = context("w");
  ASSERT_TRUE(append_each(*a, *ctx, {"board.log"}, "a0").ok());  // created by a
  ASSERT_TRUE(append_each(*b, *ctx, {"board.log"}, "b0").ok());  // b never flushed it: an fsync
  std::vector<std::string> acked = {"a0", "b0"};
  for (int i = 1; i <= 10; ++i) {
    for (DataDir* dir : {a.get(), b.get()}) {
      const std::string rec = std::string(dir == a.get() ? "a" : "b") + std::to_string(i);
      ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, rec).ok());
      acked.push_back(rec);
    }
  }
  EXPECT_GT(a->store_stats().journal_rounds, 5u);
  EXPECT_GT(b->store_stats().journal_rounds, 5u);
  // a appends and has not flushed when b's record is acknowledged, and then the power goes:
  // b's entry must carry a's record too, or b's would follow a hole.
  std::promise<void> appended, cut;
  std::thread writer([&] {
    auto ctx_a = context("a");
    DurableScope durable;
    {
      auto g = ctx_a->exclusive("board");
      EXPECT_TRUE(a->append(g, "board.log", "a-unflushed").ok());
    }
    ctx_a->end_request();
    appended.set_value();
    cut.get_future().wait();
    EXPECT_FALSE(durable.wait().ok()) << "the power is gone";
  });
  appended.get_future().wait();
  ASSERT_TRUE(append_each(*b, *ctx, {"board.log"}, "b-acked").ok());
  acked.push_back("a-unflushed");
  acked.push_back("b-acked");
  power.cut_after(1);
  cut.set_value();
  writer.join();
  a.reset();
  b.reset();
  cut_power(power, root_ / "two");
  auto after = open(real_fs(), "two", false);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->replayed().journals, 2u);
  EXPECT_EQ(records(*after, "board.log"), acked);
  EXPECT_EQ(after->damaged_spans(), 0u);
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A journal cut short at any byte (the power went while it was written) gives back the entries
// before the cut and nothing after: the log then holds what its own flush kept plus a prefix of
// the journaled records, never a damaged span.
TEST_F(GroupCommitTest, AJournalCutAtAnyByteReplaysOnlyItsWholeEntries) {
  PowerCutFs power;
  auto dir = open(power, "torn");
  ASSERT_TRUE(dir);
  auto ctx = context("w");
  ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "first").ok());  // a new log: flushed
  const std::vector<std::string> journaled = {"second", "third", "fourth"};
  for (const std::string& rec : journaled) {
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, rec).ok());  // a round each
  }
  EXPECT_EQ(dir->store_stats().journal_rounds, 3u);
  dir.reset();
  const fs::path log = root_ / "torn" / "board.log";
  const fs::path journal = root_ / "torn" / std::string(detail::kJournalFolder) / "0";
  struct stat st {};
  ASSERT_EQ(::stat(log.c_str(), &st), 0);
  const std::string flushed = power.durable(st).value();
  const std::string written = slurp(journal);
  const auto contents = detail::decode_journal(written);
  ASSERT_TRUE(contents.has_value());
  ASSERT_EQ(contents->entries.size(), journaled.size());
  std::vector<size_t> ends;  // where each entry ends
  size_t end = detail::kJournalHeaderSize;
  for (const auto& entry : contents->entries)
    ends.push_back(end += detail::journal_entry_size(entry));

  for (size_t cut = 0; cut <= contents->used; ++cut) {
    std::ofstream(log, std::ios::binary | std::ios::trunc) << flushed;
    std::ofstream(journal, std::ios::binary | std::ios::trunc)
        << written.substr(0, cut) << std::string(written.size() - cut, '\0');
    auto after = open(real_fs(), "torn", false);
    ASSERT_TRUE(after);
    std::vector<std::string> want = {"first"};
    for (size_t i = 0; i < ends.size() && ends[i] <= cut; ++i) want.push_back(journaled[i]);
    ASSERT_EQ(records(*after, "board.log"), want) << "cut at byte " << cut;
    ASSERT_EQ(after->damaged_spans(), 0u) << "cut at byte " << cut;
  }
}

// A process that wrote through its journal exits (or is killed) and the next one starts: the
// logs hold every record, but perhaps only in the page cache. Replay finds nothing to write
// back and must still flush them before it empties the journal, or a power cut right after
// the restart loses what was acknowledged.
TEST_F(GroupCommitTest, ARestartFlushesTheLogsBeforeItEmptiesTheJournal) {
  PowerCutFs power;
  {
    auto dir = open(power, "restart");
    ASSERT_TRUE(dir);
    auto ctx = context("w");
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "first").ok());
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "journaled").ok());
    EXPECT_EQ(dir->store_stats().journal_rounds, 1u);
  }
  {
    auto next = open(power, "restart");  // the restart: replays, then takes the slot again
    ASSERT_TRUE(next);
    EXPECT_EQ(next->replayed().entries, 1u);
    EXPECT_EQ(next->replayed().restored, 0u) << "the page cache held the record";
  }
  cut_power(power, root_ / "restart");
  auto after = open(real_fs(), "restart", false);
  ASSERT_TRUE(after);
  EXPECT_EQ(records(*after, "board.log"), (std::vector<std::string>{"first", "journaled"}));
}

// A log compacted in the middle of an epoch has entries for the old file, then for the new
// one: each entry is matched against the file the path names now.
TEST_F(GroupCommitTest, ReplayMatchesEveryEntryAgainstTheFileThePathNames) {
  PowerCutFs power;
  auto dir = open(power, "compacted");
  ASSERT_TRUE(dir);
  auto ctx = context("w");
  ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "first").ok());
  ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "old file").ok());  // journaled
  {
    auto g = ctx->exclusive("board");
    ASSERT_TRUE(dir->rewrite_log(g, "board.log", {"first", "old file"}).ok());
  }
  ctx->end_request();
  ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "new file 1").ok());  // a new file: fsync
  ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "new file 2").ok());  // journaled
  EXPECT_GE(dir->store_stats().journal_rounds, 2u);
  dir.reset();
  cut_power(power, root_ / "compacted");
  auto after = open(real_fs(), "compacted", false);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->replayed().skipped, 1u) << "the old file's entry";
  EXPECT_GE(after->replayed().restored, 1u) << "the new file's";
  EXPECT_EQ(records(*after, "board.log"),
            (std::vector<std::string>{"first", "old file", "new file 1", "new file 2"}));
}

// A writer died mid-append and left a torn tail; a reader's flush covers the file as it is,
// torn bytes included. The next writer cuts them and writes its record there: that record is
// not durable yet, whatever the reader's flush covered, and must be flushed before it is
// acknowledged.
TEST_F(GroupCommitTest, ATornTailAReaderSawIsNotCountedDurableForTheRecordWrittenOverIt) {
  for (const bool journal : {true, false}) {
    const std::string sub = journal ? "torn-journal" : "torn-fsync";
    PowerCutFs power;
    auto dir = open(power, sub, true, 0, journal);
    ASSERT_TRUE(dir);
    auto ctx = context("w");
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "first").ok());
    {
      // A frame of a 100-byte record cut off after 40 bytes.
      std::string frame;
      detail::encode_record(frame, std::string(100, 'x'));
      const fs::path log = root_ / sub / "board.log";
      const auto size = fs::file_size(log);
      std::ofstream(log, std::ios::binary | std::ios::app) << frame.substr(0, 40);
      ASSERT_EQ(fs::file_size(log), size + 40);
    }
    {
      DurableScope durable;
      {
        auto g = ctx->shared("board");
        ASSERT_EQ(dir->read_log(g, "board.log").value(), std::vector<std::string>{"first"});
      }
      ctx->end_request();
      ASSERT_TRUE(durable.wait().ok());
    }
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "second").ok());  // 14 bytes, in the 40
    dir.reset();
    cut_power(power, root_ / sub);
    auto after = open(real_fs(), sub, false);
    ASSERT_TRUE(after);
    EXPECT_EQ(records(*after, "board.log"), (std::vector<std::string>{"first", "second"}))
        << (journal ? "with" : "without") << " the journal: the acknowledged record was lost";
  }
}

// The filesystem, with the first read of journal slot 0 held until release(): a replay that
// is under way.
class HeldReplayFs final : public testing::ForwardingFs {
 public:
  ssize_t pread(int fd, void* buf, size_t n, off_t offset) override {
    if (testing::path_of_fd(fd).ends_with("/.kagi-journal/0")) {
      std::unique_lock lock(mu_);
      if (!held_once_) {
        held_once_ = true;
        holding_ = true;
        changed_.notify_all();
        changed_.wait(lock, [&] { return released_; });
      }
    }
    return real_fs().pread(fd, buf, n, offset);
  }
  void wait_until_holding() {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [&] { return holding_; });
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool held_once_ = false, holding_ = false, released_ = false;
};

// Two processes start at once after a power cut: while one replays a journal, the other must
// not take that journal's slot for a live writer's and serve the logs it is putting back.
TEST_F(GroupCommitTest, AnOpeningWaitsWhileAnotherReplays) {
  {
    auto dir = open(real_fs(), "two-starts");
    ASSERT_TRUE(dir);
    auto ctx = context("w");
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "first").ok());
    ASSERT_TRUE(append_each(*dir, *ctx, {"board.log"}, "journaled").ok());
  }
  HeldReplayFs held;
  std::unique_ptr<DataDir> first;
  std::thread replaying([&] { first = open(held, "two-starts"); });
  held.wait_until_holding();
  std::atomic<bool> second_open{false};
  std::unique_ptr<DataDir> second;
  std::thread starting([&] {
    second = open(real_fs(), "two-starts");
    second_open = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(second_open.load()) << "the second opening went on while the first replayed";
  held.release();
  replaying.join();
  starting.join();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->replayed().entries, 1u);
  EXPECT_EQ(second->replayed().entries, 0u) << "replayed once";
}

}  // namespace
}  // namespace kagi::store
