// util/histogram.hpp — a lock-free latency histogram with fixed log-scale buckets: bucket i
// counts durations below 2^i µs (the last bucket is everything longer). Fixed buckets mean
// snapshots from several processes add up bucket by bucket and export to Prometheus as
// cumulative `le` buckets. Used for lock wait/hold times and request latencies.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace kagi::util {

inline constexpr size_t kHistogramBuckets = 26;  // < 1 µs, < 2 µs, ... < 2^24 µs (16.8 s), more

struct HistogramSnapshot {
  std::array<uint64_t, kHistogramBuckets> buckets{};
  uint64_t count = 0;
  uint64_t sum_us = 0;
  // Upper bound of bucket i in µs (the last bucket is unbounded).
  static uint64_t upper_bound_us(size_t i) { return uint64_t{1} << i; }
  // The smallest bucket bound below which at least `q` (0..1) of the samples fall.
  uint64_t quantile_bound_us(double q) const;
  // Adds every bucket, the count and the sum of `other`.
  void add(const HistogramSnapshot& other);
};

// Thread-safe; record() is a few relaxed atomic adds.
class Histogram {
 public:
  void record(std::chrono::nanoseconds d);
  HistogramSnapshot snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kHistogramBuckets> buckets_{};
  std::atomic<uint64_t> sum_us_{0};
};

}  // namespace kagi::util
