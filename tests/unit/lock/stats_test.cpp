#include "lock/stats.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

TEST(StatsTest, HistogramBucketsAreLog2Microseconds) {
  Histogram h;
  h.record(500ns);   // < 1 µs → bucket 0
  h.record(1us);     // [1, 2) µs → bucket 1
  h.record(3us);     // [2, 4) → bucket 2
  h.record(1500us);  // [1024, 2048) → bucket 11
  h.record(10000s);  // beyond the last bound → last bucket
  HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.buckets[0], 1u);
  EXPECT_EQ(s.buckets[1], 1u);
  EXPECT_EQ(s.buckets[2], 1u);
  EXPECT_EQ(s.buckets[11], 1u);
  EXPECT_EQ(s.buckets[kHistogramBuckets - 1], 1u);
  EXPECT_EQ(HistogramSnapshot::upper_bound_us(11), 2048u);
  EXPECT_EQ(s.quantile_bound_us(0.5), 4u);
}

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
