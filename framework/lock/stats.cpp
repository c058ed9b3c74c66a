#include "lock/stats.hpp"

#include <bit>
#include <mutex>

#include "lock/names.hpp"

namespace kagi::lock {

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

PrefixStatsSnapshot PrefixStats::snapshot() const {
  PrefixStatsSnapshot s;
  s.acquisitions = acquisitions.load(std::memory_order_relaxed);
  s.contended = contended.load(std::memory_order_relaxed);
  s.timeouts = timeouts.load(std::memory_order_relaxed);
  s.order_violations = order_violations.load(std::memory_order_relaxed);
  s.leaks = leaks.load(std::memory_order_relaxed);
  s.wait = wait.snapshot();
  s.hold = hold.snapshot();
  return s;
}

namespace {
void add(HistogramSnapshot& to, const HistogramSnapshot& from) {
  for (size_t i = 0; i < kHistogramBuckets; ++i) to.buckets[i] += from.buckets[i];
  to.count += from.count;
  to.sum_us += from.sum_us;
}
}  // namespace

PrefixStatsSnapshot StatsSnapshot::total() const {
  PrefixStatsSnapshot t;
  for (const auto& [prefix, s] : prefixes) {
    t.acquisitions += s.acquisitions;
    t.contended += s.contended;
    t.timeouts += s.timeouts;
    t.order_violations += s.order_violations;
    t.leaks += s.leaks;
    add(t.wait, s.wait);
    add(t.hold, s.hold);
  }
  return t;
}

PrefixStats& Stats::for_name(std::string_view name) {
  std::string_view prefix = name_prefix(name);
  {
    std::shared_lock lock(mu_);
    auto it = prefixes_.find(prefix);
    if (it != prefixes_.end()) return *it->second;
  }
  std::unique_lock lock(mu_);
  if (prefixes_.size() >= kMaxPrefixes && !prefixes_.contains(prefix)) {
    prefix = "(other)";
  }
  auto& slot = prefixes_[std::string(prefix)];
  if (!slot) slot = std::make_unique<PrefixStats>();
  return *slot;
}

StatsSnapshot Stats::snapshot() const {
  StatsSnapshot s;
  std::shared_lock lock(mu_);
  for (const auto& [prefix, stats] : prefixes_) s.prefixes.emplace(prefix, stats->snapshot());
  return s;
}

}  // namespace kagi::lock
