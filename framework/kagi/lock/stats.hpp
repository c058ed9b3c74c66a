// lock/stats.hpp — lock statistics per name prefix ("bbs/board/3" counts under "bbs/board"):
// acquisitions, contended acquisitions, timeouts, order violations, leaks, revocations, and
// wait-time and hold-time histograms.
//
// Histograms are util::Histogram: fixed log-scale buckets, so snapshots from several
// processes can be summed bucket by bucket and exported to Prometheus.
//
// Recording is lock-free once a prefix is known (atomic counters); looking a prefix up takes
// a shared (reader) lock. At most kMaxPrefixes distinct prefixes are tracked; further ones
// are counted under "(other)" so hostile or generated names cannot grow memory without bound.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include <kagi/lock/detail/names.hpp>
#include <kagi/util/histogram.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock {

// The histogram lives in util (request latencies use it too); these names keep lock code short.
using util::Histogram;
using util::HistogramSnapshot;
using util::kHistogramBuckets;

inline constexpr size_t kMaxPrefixes = 4096;

struct PrefixStatsSnapshot {
  uint64_t acquisitions = 0;
  uint64_t contended = 0;
  uint64_t timeouts = 0;
  uint64_t order_violations = 0;
  uint64_t leaks = 0;
  uint64_t revocations = 0;  // held past locks.max_hold_ms or revoked by an admin
  HistogramSnapshot wait;
  HistogramSnapshot hold;
  // Adds every counter and histogram bucket of `other` (summing processes or prefixes).
  void add(const PrefixStatsSnapshot& other);
};

struct StatsSnapshot {
  std::map<std::string, PrefixStatsSnapshot> prefixes;  // sorted by prefix
  PrefixStatsSnapshot total() const;
};

struct PrefixStats {
  std::atomic<uint64_t> acquisitions{0};
  std::atomic<uint64_t> contended{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> order_violations{0};
  std::atomic<uint64_t> leaks{0};
  std::atomic<uint64_t> revocations{0};
  Histogram wait;
  Histogram hold;
  PrefixStatsSnapshot snapshot() const;
};

// Thread-safe. PrefixStats pointers stay valid for the lifetime of the Stats.
class Stats {
 public:
  Stats();
  Stats(const Stats&) = delete;
  Stats& operator=(const Stats&) = delete;

  // The counters for `name`'s prefix (see lock/detail/names.hpp name_prefix). Each thread remembers
  // its last prefix, so a repeated prefix costs no lookup and no reader lock.
  PrefixStats& for_name(std::string_view name);
  StatsSnapshot snapshot() const KAGI_EXCLUDES(mu_);

 private:
  PrefixStats* lookup(std::string_view prefix) KAGI_EXCLUDES(mu_);

  const uint64_t id_;  // unique per Stats in the process: keys the per-thread last prefix
  mutable util::SharedMutex mu_;
  std::unordered_map<std::string, std::unique_ptr<PrefixStats>, NameHash, std::equal_to<>> prefixes_
      KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::lock
