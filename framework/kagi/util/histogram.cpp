#include <kagi/util/histogram.hpp>

#include <bit>

namespace kagi::util {

void Histogram::record(std::chrono::nanoseconds d) {
  const uint64_t us = d.count() <= 0 ? 0 : static_cast<uint64_t>(d.count()) / 1000;
  // Bucket i holds [2^(i-1), 2^i) µs; bucket 0 holds < 1 µs.
  size_t i = us == 0 ? 0 : static_cast<size_t>(std::bit_width(us));
  if (i >= kHistogramBuckets) i = kHistogramBuckets - 1;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  for (size_t i = 0; i < kHistogramBuckets; ++i) {
    s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    s.count += s.buckets[i];
  }
  s.sum_us = sum_us_.load(std::memory_order_relaxed);
  return s;
}

uint64_t HistogramSnapshot::quantile_bound_us(double q) const {
  if (count == 0) return 0;
  const double want = q * static_cast<double>(count);
  uint64_t seen = 0;
  for (size_t i = 0; i < kHistogramBuckets; ++i) {
    seen += buckets[i];
    if (static_cast<double>(seen) >= want) return upper_bound_us(i);
  }
  return upper_bound_us(kHistogramBuckets - 1);
}

void HistogramSnapshot::add(const HistogramSnapshot& other) {
  for (size_t i = 0; i < kHistogramBuckets; ++i) buckets[i] += other.buckets[i];
  count += other.count;
  sum_us += other.sum_us;
}

}  // namespace kagi::util
