// admin/status.hpp — the lock status of the host, gathered once and shown four ways: the
// HTML page (/admin/locks), JSON (/admin/locks.json, schema in docs/ADMIN.md), Prometheus
// text (/metrics) and the kagi-locks terminal table.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <kagi/lock/registry.hpp>
#include <kagi/stats/host_stats.hpp>

namespace kagi::view {
class Dict;
}

namespace kagi::apps::admin {

// Holds at least this long are "long" (highlighted on the page, `long: true` in JSON).
inline constexpr std::chrono::milliseconds kLongHold{1000};

// One lock name: who holds it and who queues behind it (oldest wait first).
struct LockRow {
  std::string name;
  std::vector<lock::RegistryEntry> holders;
  std::vector<lock::RegistryEntry> waiters;
};

struct LockStatus {
  std::chrono::system_clock::time_point now;
  int served_by = 0;           // pid of the process that gathered this
  size_t processes = 0;        // live registry files
  std::vector<LockRow> locks;  // longest-held first; names with only waiters last
  stats::HostStats host;
};

// Reads the registry and the stats files under `locks_dir` (every process on the host).
LockStatus collect_status(const std::string& locks_dir);

// Groups registry entries by name, ordered as LockStatus::locks.
std::vector<LockRow> group_entries(std::vector<lock::RegistryEntry> entries);

std::string to_json(const LockStatus& status);
std::string to_prometheus(const LockStatus& status);
std::string to_text(const LockStatus& status);
void fill_dict(const LockStatus& status, view::Dict& dict);

// "850 ms", "2.3 s", "4 min 5 s": a duration for people.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace kagi::apps::admin
