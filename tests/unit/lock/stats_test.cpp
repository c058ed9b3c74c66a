#include <kagi/lock/stats.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

TEST(StatsTest, CountsPerPrefixAndSums) {
  Stats stats;
  stats.for_name("bbs/board/1").acquisitions++;
  stats.for_name("bbs/board/2").acquisitions++;
  stats.for_name("bbs/board/2").timeouts++;
  stats.for_name("chat/room/a").leaks++;
  EXPECT_EQ(&stats.for_name("bbs/board/1"), &stats.for_name("bbs/board/9"));
  StatsSnapshot s = stats.snapshot();
  ASSERT_EQ(s.prefixes.size(), 2u);
  EXPECT_EQ(s.prefixes.at("bbs/board").acquisitions, 2u);
  EXPECT_EQ(s.prefixes.at("bbs/board").timeouts, 1u);
  EXPECT_EQ(s.prefixes.at("chat/room").leaks, 1u);
  EXPECT_EQ(s.total().acquisitions, 2u);
  EXPECT_EQ(s.total().leaks, 1u);
}

TEST(StatsTest, PrefixCountIsBounded) {
  Stats stats;
  for (size_t i = 0; i < kMaxPrefixes + 100; ++i) {
    stats.for_name("p" + std::to_string(i) + "/x").acquisitions++;
  }
  StatsSnapshot s = stats.snapshot();
  EXPECT_EQ(s.prefixes.size(), kMaxPrefixes + 1);
  EXPECT_EQ(s.prefixes.at("(other)").acquisitions, 100u);
  EXPECT_EQ(s.total().acquisitions, kMaxPrefixes + 100);
}

// Each thread remembers its last prefix; a Stats made after another one was destroyed (often
// at the same address) must never be handed the old one's counters (ASan would also catch
// the use after free).
TEST(StatsTest, RememberedPrefixNeverOutlivesItsStats) {
  auto first = std::make_unique<Stats>();
  first->for_name("bbs/board/1").acquisitions++;
  first.reset();
  auto second = std::make_unique<Stats>();
  second->for_name("bbs/board/1").acquisitions++;
  second->for_name("bbs/board/2").acquisitions++;
  EXPECT_EQ(second->snapshot().prefixes.at("bbs/board").acquisitions, 2u);
  // A different prefix in between, then the first again: still the same counters.
  second->for_name("chat/room/a").acquisitions++;
  EXPECT_EQ(&second->for_name("bbs/board/3"), &second->for_name("bbs/board/4"));
  EXPECT_EQ(second->snapshot().prefixes.at("chat/room").acquisitions, 1u);
}

TEST(StatsTest, ConcurrentRecording) {
  Stats stats;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        PrefixStats& p = stats.for_name("t/" + std::to_string((t + i) % 3) + "/x");
        p.acquisitions.fetch_add(1);
        p.wait.record(std::chrono::microseconds(i));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stats.snapshot().total().acquisitions, 40000u);
  EXPECT_EQ(stats.snapshot().total().wait.count, 40000u);
}

}  // namespace
}  // namespace kagi::lock
