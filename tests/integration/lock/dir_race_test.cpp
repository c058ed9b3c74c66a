// The dir backend's stale takeover under a real race: in each of 1,000 rounds a holder process
// takes the lock and is SIGKILLed while holding it, then 8 processes race to take it over
// (each through its own LockService, as pre-forked workers do). Checked: exactly one winner per
// round, a counter incremented by each winner under the lock is exact, a history of every
// holder's interval (the killed holders' included, up to their death) has no two overlapping,
// and a file that each holder writes its own id into, then reads back after a pause, still
// holds that id (a second holder at the same time would have written its own: the check needs
// no shared memory, only the filesystem the locks are about).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/lock_service.hpp>
#include "../../support/child_process.hpp"

namespace kagi::lock {
namespace {

using test_support::spawn;
using test_support::wait_exit;
using namespace std::chrono_literals;

constexpr int kRounds = 1000;
constexpr int kRacers = 8;

struct Interval {
  std::atomic<long long> start_ns, end_ns;
};

struct RaceState {
  std::atomic<int> round;          // racers start round r when this is r
  std::atomic<int> holder_ready;   // the round's doomed holder holds the lock
  std::atomic<int> release_round;  // the round's winner may let go
  std::atomic<int> released;       // ... and did
  std::atomic<int> inside;         // holders right now
  std::atomic<int> overlaps;
  std::atomic<int> clobbered;  // a holder read back another holder's id from the id file
  std::atomic<int> errors;
  std::atomic<int> winners[kRounds];
  std::atomic<int> done[kRounds];
  Interval history[2 * kRounds];  // 2r: the killed holder, 2r+1: the winner
};

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes `id` into the shared id file, waits, and reads it back: false if another holder wrote
// meanwhile (or the file could not be used).
bool still_alone(const std::string& file, const std::string& id) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0) return false;
  bool alone = ::pwrite(fd, id.data(), id.size(), 0) == static_cast<ssize_t>(id.size()) &&
               ::ftruncate(fd, static_cast<off_t>(id.size())) == 0;
  std::this_thread::sleep_for(200us);
  char buf[64] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  return alone && n == static_cast<ssize_t>(id.size()) && id == buf;
}

template <typename Pred>
bool wait_for(Pred pred, std::chrono::seconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(50us);
  }
  return true;
}

class DirRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-dirrace-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::unique_ptr<LockService> service() {
    LockOptions o;
    o.backend = "dir";
    o.dir = root_ + "/locks";
    o.dir_host_id = "h";  // one host: a killed holder's pid is seen dead at once
    o.timeout = 10s;
    o.registry = false;
    return LockService::create(o);
  }
  std::string root_;
};

TEST_F(DirRaceTest, EachKilledHolderIsTakenOverByExactlyOneOfEightRacers) {
  void* mem =
      ::mmap(nullptr, sizeof(RaceState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  RaceState* st = new (mem) RaceState();
  st->round = -1;
  st->holder_ready = -1;
  st->release_round = -1;
  st->released = -1;
  const std::string counter = root_ + "/counter";
  const std::string id_file = root_ + "/holder";
  {
    const int fd = ::open(counter.c_str(), O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "0", 1, 0), 1);
    ::close(fd);
  }
  std::filesystem::create_directories(root_ + "/locks");

  std::vector<pid_t> racers;
  for (int i = 0; i < kRacers; ++i) {
    racers.push_back(spawn([&, i] {
      auto locks = service();
      for (int r = 0; r < kRounds; ++r) {
        if (!wait_for([&] { return st->round.load() >= r; })) return 2;
        auto ctx = locks->context({"racer" + std::to_string(i), "POST", "/race", ""});
        bool won = false;
        while (!won && st->winners[r].load() == 0) {
          auto g = ctx->try_exclusive("race/x");  // one try: takes over a stale record first
          if (!g) {
            std::this_thread::sleep_for(100us);
            continue;
          }
          const long long start = now_ns();
          if (st->inside.fetch_add(1) != 0) st->overlaps.fetch_add(1);
          st->winners[r].fetch_add(1);
          st->history[2 * r + 1].start_ns = start;
          if (!still_alone(id_file, "racer " + std::to_string(i) + " round " + std::to_string(r))) {
            st->clobbered.fetch_add(1);
          }
          const int fd = ::open(counter.c_str(), O_RDWR);  // read, pause, write: a lost update
          char buf[32] = {};                               // would show without the lock
          if (fd < 0 || ::pread(fd, buf, sizeof buf - 1, 0) <= 0) st->errors.fetch_add(1);
          std::this_thread::sleep_for(20us);
          const std::string next = std::to_string(std::atoll(buf) + 1);
          if (::pwrite(fd, next.data(), next.size(), 0) != static_cast<ssize_t>(next.size()) ||
              ::ftruncate(fd, static_cast<off_t>(next.size())) != 0) {
            st->errors.fetch_add(1);
          }
          ::close(fd);
          st->done[r].fetch_add(1);  // the winner is done too; it holds on until told
          if (!wait_for([&] { return st->release_round.load() >= r; })) return 3;
          st->history[2 * r + 1].end_ns = now_ns();
          st->inside.fetch_sub(1);
          g->release();
          st->released = r;
          won = true;
        }
        if (!won) st->done[r].fetch_add(1);
      }
      return 0;
    }));
  }

  const auto started = std::chrono::steady_clock::now();
  for (int r = 0; r < kRounds; ++r) {
    pid_t holder = spawn([&, r]() -> int {
      auto locks = service();
      auto ctx = locks->context({"doomed", "POST", "/race", ""});
      auto g = ctx->exclusive("race/x");
      if (st->inside.fetch_add(1) != 0) st->overlaps.fetch_add(1);
      st->history[2 * r].start_ns = now_ns();
      if (!still_alone(id_file, "doomed round " + std::to_string(r))) st->clobbered.fetch_add(1);
      st->holder_ready = r;
      for (;;) ::pause();
    });
    ASSERT_TRUE(wait_for([&] { return st->holder_ready.load() == r; })) << "round " << r;
    ASSERT_EQ(::kill(holder, SIGKILL), 0);
    ASSERT_EQ(wait_exit(holder), 128 + SIGKILL);
    st->history[2 * r].end_ns = now_ns();  // dead: it holds nothing from here on
    st->inside.fetch_sub(1);
    st->round = r;
    ASSERT_TRUE(wait_for([&] { return st->done[r].load() == kRacers; })) << "round " << r;
    st->release_round = r;
    ASSERT_TRUE(wait_for([&] { return st->released.load() == r; })) << "round " << r;
  }
  for (pid_t p : racers) EXPECT_EQ(wait_exit(p), 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  int rounds_with_one = 0;
  for (int r = 0; r < kRounds; ++r) rounds_with_one += st->winners[r].load() == 1;
  char buf[32] = {};
  const int fd = ::open(counter.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_GT(::pread(fd, buf, sizeof buf - 1, 0), 0);
  ::close(fd);
  std::vector<std::pair<long long, long long>> intervals;
  for (const Interval& i : st->history) intervals.emplace_back(i.start_ns.load(), i.end_ns.load());
  std::sort(intervals.begin(), intervals.end());
  int overlapping = 0;
  for (size_t i = 1; i < intervals.size(); ++i) {
    overlapping += intervals[i].first < intervals[i - 1].second;
  }
  std::printf(
      "  %d rounds (holder SIGKILLed, %d racers) in %.1f s: %d with exactly one winner, counter "
      "%s, %d overlapping holders in the history, %d overlaps seen live, %d id file "
      "clobbered\n",
      kRounds, kRacers, seconds, rounds_with_one, buf, overlapping, st->overlaps.load(),
      st->clobbered.load());
  EXPECT_EQ(rounds_with_one, kRounds);
  EXPECT_EQ(std::atoi(buf), kRounds);
  EXPECT_EQ(overlapping, 0);
  EXPECT_EQ(st->overlaps.load(), 0);
  EXPECT_EQ(st->clobbered.load(), 0);
  EXPECT_EQ(st->errors.load(), 0);
  ::munmap(mem, sizeof(RaceState));
}

}  // namespace
}  // namespace kagi::lock
