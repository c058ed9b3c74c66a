#include <kagi/lock/stats.hpp>

#include <algorithm>
#include <cstring>

#include <kagi/lock/detail/names.hpp>

namespace kagi::lock {

PrefixStatsSnapshot PrefixStats::snapshot() const {
  PrefixStatsSnapshot s;
  s.acquisitions = acquisitions.load(std::memory_order_relaxed);
  s.contended = contended.load(std::memory_order_relaxed);
  s.timeouts = timeouts.load(std::memory_order_relaxed);
  s.order_violations = order_violations.load(std::memory_order_relaxed);
  s.leaks = leaks.load(std::memory_order_relaxed);
  s.revocations = revocations.load(std::memory_order_relaxed);
  s.wait = wait.snapshot();
  s.hold = hold.snapshot();
  return s;
}

void PrefixStatsSnapshot::add(const PrefixStatsSnapshot& other) {
  acquisitions += other.acquisitions;
  contended += other.contended;
  timeouts += other.timeouts;
  order_violations += other.order_violations;
  leaks += other.leaks;
  revocations += other.revocations;
  wait.add(other.wait);
  hold.add(other.hold);
}

PrefixStatsSnapshot StatsSnapshot::total() const {
  PrefixStatsSnapshot t;
  for (const auto& [prefix, s] : prefixes) t.add(s);
  return t;
}

namespace {

std::atomic<uint64_t> g_next_stats_id{1};

// This thread's last prefix lookup. `owner` is a Stats id, never reused, so a Stats made at
// the address of a destroyed one cannot hit a stale entry.
struct LastPrefix {
  uint64_t owner = 0;
  size_t size = 0;
  char prefix[64];
  PrefixStats* stats = nullptr;
};
thread_local LastPrefix t_last;

}  // namespace

Stats::Stats() : id_(g_next_stats_id.fetch_add(1, std::memory_order_relaxed)) {}

PrefixStats& Stats::for_name(std::string_view name) {
  const std::string_view prefix = name_prefix(name);
  LastPrefix& last = t_last;
  if (last.owner == id_ && last.size == prefix.size() &&
      std::memcmp(last.prefix, prefix.data(), prefix.size()) == 0) {
    return *last.stats;
  }
  PrefixStats* found = lookup(prefix);
  if (prefix.size() <= sizeof last.prefix) {
    last.owner = id_;
    last.size = prefix.size();
    std::copy(prefix.begin(), prefix.end(), last.prefix);
    last.stats = found;
  }
  return *found;
}

PrefixStats* Stats::lookup(std::string_view prefix) {
  {
    util::ReaderLock lock(mu_);
    auto it = prefixes_.find(prefix);
    if (it != prefixes_.end()) return it->second.get();
  }
  util::WriterLock lock(mu_);
  if (prefixes_.size() >= kMaxPrefixes && !prefixes_.contains(prefix)) {
    prefix = "(other)";
  }
  auto& slot = prefixes_[std::string(prefix)];
  if (!slot) slot = std::make_unique<PrefixStats>();
  return slot.get();
}

StatsSnapshot Stats::snapshot() const {
  StatsSnapshot s;
  util::ReaderLock lock(mu_);
  for (const auto& [prefix, stats] : prefixes_) s.prefixes.emplace(prefix, stats->snapshot());
  return s;
}

}  // namespace kagi::lock
