#include <kagi/util/histogram.hpp>

#include <gtest/gtest.h>

namespace kagi::util {
namespace {

using namespace std::chrono_literals;

TEST(HistogramTest, BucketsAreLog2Microseconds) {
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

TEST(HistogramTest, NegativeDurationsCountAsZero) {
  Histogram h;
  h.record(-5ms);
  HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.buckets[0], 1u);
  EXPECT_EQ(s.sum_us, 0u);
}

TEST(HistogramTest, SnapshotsAddBucketByBucket) {
  Histogram a, b;
  a.record(3us);
  b.record(3us);
  b.record(1500us);
  HistogramSnapshot sum = a.snapshot();
  sum.add(b.snapshot());
  EXPECT_EQ(sum.count, 3u);
  EXPECT_EQ(sum.buckets[2], 2u);
  EXPECT_EQ(sum.buckets[11], 1u);
  EXPECT_EQ(sum.sum_us, 3u + 3u + 1500u);
  EXPECT_EQ(HistogramSnapshot{}.quantile_bound_us(0.99), 0u);  // empty: no bound
}

}  // namespace
}  // namespace kagi::util
