// GroupSync on its own (group commit's rounds, without a DataDir): what drain() waits for, and
// an answer that needs a flush of its own. group_commit_test.cpp covers what the rounds promise
// through the DataDir.
#include <kagi/store/detail/group_sync.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.hpp"
#include "slow_sync_fs.hpp"

namespace kagi::store::detail {
namespace {

using namespace std::chrono_literals;
using testing::SlowSyncFs;

class GroupSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    path_ = tmp_.path() + "/board.log";
    fd_.reset(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_GE(fd_.get(), 0);
    struct stat st {};
    ASSERT_EQ(::fstat(fd_.get(), &st), 0);
    id_ = FileId{.dev = st.st_dev, .ino = st.st_ino, .birth_ns = 0};
  }

  // The file must be durable up to `end` (its bytes do not matter to the rounds).
  std::vector<SyncNeed> need(uint64_t end) {
    std::vector<SyncNeed> needs;
    needs.push_back(
        SyncNeed{.id = id_, .end = end, .fd = util::UniqueFd(::dup(fd_.get())), .path = path_});
    return needs;
  }

  test_support::TempDir tmp_;
  std::string path_;
  util::UniqueFd fd_;
  FileId id_;
};

// drain() (the App's shutdown) returns once every answer is given, not only flushed: here it
// is called while the round's only answer is running, its request already taken off the queue.
TEST_F(GroupSyncTest, DrainReturnsOnceEveryAnswerIsGiven) {
  SlowSyncFs slow;
  GroupSync sync(slow);
  std::promise<void> answering;
  std::atomic<bool> answered{false};
  sync.submit(need(1), [&](Status) {
    answering.set_value();
    std::this_thread::sleep_for(100ms);
    answered = true;
  });
  ASSERT_EQ(answering.get_future().wait_for(10s), std::future_status::ready);
  sync.drain();
  EXPECT_TRUE(answered.load());
}

// An answer that waits for a flush of its own (a `done` that makes another record durable and
// blocks until it is: DurableScope::wait() in a handler the answer completes) is flushed there
// and then: queued behind itself on the flush thread, it would wait forever.
TEST_F(GroupSyncTest, AnAnswerThatWaitsForAnotherFlushIsFlushedWhereItRuns) {
  SlowSyncFs slow;
  GroupSync sync(slow);
  std::promise<bool> outer;
  sync.submit(need(1), [&](Status) {
    auto inner = std::make_shared<std::promise<Status>>();  // outlives this answer if it must
    auto got = inner->get_future();
    sync.submit(need(2), [inner](Status s) { inner->set_value(s); });
    outer.set_value(got.wait_for(5s) == std::future_status::ready && got.get().ok());
  });
  auto result = outer.get_future();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(result.get()) << "the inner flush's answer waited behind the answer waiting for it";
  EXPECT_TRUE(sync.durable(id_, 2));
}

}  // namespace
}  // namespace kagi::store::detail
