#include "chat/watcher.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <kagi/store/detail/folder_feed.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::apps::chat {
namespace {

using namespace std::chrono_literals;
using Clock = ParkingLot::Clock;

// Answers of fake parked requests, awaited with a deadline.
class Answers {
 public:
  ParkingLot::Waiter waiter(std::string room, int64_t since, Clock::time_point deadline,
                            std::shared_ptr<std::atomic<bool>> gone = nullptr) {
    return {.room = std::move(room),
            .since = since,
            .deadline = deadline,
            .complete =
                [this](std::string body) {
                  util::MutexLock lock(mu_);
                  bodies_.push_back(std::move(body));
                  cv_.notify_all();
                  return true;
                },
            .gone = [gone] { return gone && gone->load(); }};
  }
  // Waits (at most 10 s: a generous bound, not a measurement) for `n` answers.
  std::vector<std::string> await(size_t n) KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (bodies_.size() < n && cv_.wait_until(mu_, deadline) != std::cv_status::timeout) {
    }
    return bodies_;
  }

 private:
  util::Mutex mu_;
  util::CondVar cv_;
  std::vector<std::string> bodies_ KAGI_GUARDED_BY(mu_);
};

class WatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-chat-watcher-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/chat/rooms";  // created by the watcher
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A watcher on the rooms folder (what DataDir::watch gives the chat) whose refresh is
  // `refresh`; null (and a failed expectation) if it cannot start.
  std::unique_ptr<RoomWatcher> watcher(RoomWatcher::Refresh refresh) {
    std::error_code ec;
    auto feed = store::detail::watch_folder(dir_, "chat/rooms/", 0700, ec);
    EXPECT_TRUE(feed) << ec.message();
    if (!feed) return nullptr;
    auto watcher =
        std::make_unique<RoomWatcher>(std::move(feed), "chat/rooms", lot_, std::move(refresh), ec);
    EXPECT_FALSE(ec) << ec.message();
    if (ec) return nullptr;
    return watcher;
  }
  // A watcher whose refresh answers the room's parked requests with `room` (last id 1).
  std::unique_ptr<RoomWatcher> delivering_watcher(const std::vector<Message>& room) {
    return watcher([this, &room](const std::string& name) { lot_.deliver(name, room, 1); });
  }

  std::string root_, dir_;
  ParkingLot lot_;
};

// A change to a room's log made by ANOTHER process wakes this process's parked requests.
TEST_F(WatcherTest, AnotherProcessAppendingWakesTheRoom) {
  Answers answers;
  std::vector<Message> room{{.id = 1, .name = "ann", .text = "hi"}};
  auto watcher = delivering_watcher(room);
  ASSERT_TRUE(watcher);
  lot_.park(answers.waiter("lobby", 0, Clock::now() + 1h));
  lot_.park(answers.waiter("other", 0, Clock::now() + 1h));
  watcher->watch();  // what a parking request does before it lets go of the room's lock

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ofstream(dir_ + "/lobby.log", std::ios::app) << "x";
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);

  auto got = answers.await(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], messages_json(room, 1));
  EXPECT_TRUE(lot_.has_waiters("other"));  // its log did not change
  EXPECT_GE(watcher->refreshes(), 1u);
}

// Without parked requests nothing is watched (an append would wake the thread for nothing);
// a request that parks brings the watch back, and the next append still wakes it.
TEST_F(WatcherTest, WatchesOnlyWhileRequestsAreParked) {
  Answers answers;
  std::vector<Message> room{{.id = 1, .name = "ann", .text = "hi"}};
  auto watcher = delivering_watcher(room);
  ASSERT_TRUE(watcher);
  watcher->wake();  // one turn of the thread with nobody parked
  for (auto until = Clock::now() + 10s; watcher->watching() && Clock::now() < until;) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_FALSE(watcher->watching());
  std::ofstream(dir_ + "/lobby.log", std::ios::app) << "unwatched";
  lot_.park(answers.waiter("lobby", 0, Clock::now() + 1h));
  watcher->watch();
  EXPECT_TRUE(watcher->watching());
  const auto appended = Clock::now();
  std::ofstream(dir_ + "/lobby.log", std::ios::app) << "x";
  auto got = answers.await(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], messages_json(room, 1));
  // Woken by the change itself, not by the slow safety-net recheck.
  EXPECT_LT(Clock::now() - appended, RoomWatcher::kRecheck / 2);
}

TEST_F(WatcherTest, AnswersEmptyAtTheDeadline) {
  Answers answers;
  auto watcher = this->watcher([](const std::string&) {});
  ASSERT_TRUE(watcher);
  const auto t0 = Clock::now();
  if (lot_.park(answers.waiter("lobby", 7, t0 + 200ms)).earliest) watcher->wake();
  auto got = answers.await(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], R"({"messages":[],"last":7})");
  EXPECT_GE(Clock::now() - t0, 200ms);  // not before its deadline
  EXPECT_EQ(lot_.stats().expired, 1u);
}

TEST_F(WatcherTest, FreesRequestsWhoseClientWentAway) {
  Answers answers;
  auto watcher = this->watcher([](const std::string&) {});
  ASSERT_TRUE(watcher);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  for (int i = 0; i < 100; ++i) lot_.park(answers.waiter("lobby", 0, Clock::now() + 1h, gone));
  gone->store(true);
  EXPECT_EQ(answers.await(100).size(), 100u);
  EXPECT_EQ(lot_.stats().gone, 100u);
  EXPECT_EQ(lot_.stats().parked, 0u);
}

// A change to another file of the folder (not a room log) wakes nobody.
TEST_F(WatcherTest, IgnoresFilesThatAreNotRoomLogs) {
  Answers answers;
  std::atomic<int> refreshed{0};
  auto watcher = this->watcher([&](const std::string&) { refreshed.fetch_add(1); });
  ASSERT_TRUE(watcher);
  lot_.park(answers.waiter("lobby", 0, Clock::now() + 1h));
  watcher->watch();
  std::ofstream(dir_ + "/lobby.txt", std::ios::app) << "x";
  std::this_thread::sleep_for(300ms);  // time for a (wrong) wake-up to show
  EXPECT_EQ(refreshed.load(), 0);
  std::ofstream(dir_ + "/lobby.log", std::ios::app) << "x";
  for (auto until = Clock::now() + 10s; refreshed.load() == 0 && Clock::now() < until;) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GE(refreshed.load(), 1);  // the log does wake it
}

}  // namespace
}  // namespace kagi::apps::chat
