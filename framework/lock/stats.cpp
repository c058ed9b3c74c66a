#include "lock/stats.hpp"

#include <mutex>

#include "lock/names.hpp"

namespace kagi::lock {

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

void PrefixStatsSnapshot::add(const PrefixStatsSnapshot& other) {
  acquisitions += other.acquisitions;
  contended += other.contended;
  timeouts += other.timeouts;
  order_violations += other.order_violations;
  leaks += other.leaks;
  wait.add(other.wait);
  hold.add(other.hold);
}

PrefixStatsSnapshot StatsSnapshot::total() const {
  PrefixStatsSnapshot t;
  for (const auto& [prefix, s] : prefixes) t.add(s);
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
