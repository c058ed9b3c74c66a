// admin/status.hpp — the lock status of the host, gathered once and shown four ways: the
// HTML page (/admin/locks), JSON (/admin/locks.json, schema in docs/ADMIN.md), Prometheus
// text (/metrics) and the kagi-locks terminal table. With a lock backend that several hosts
// share (postgres), it also carries what every host holds and waits for, read from the lock
// server.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <kagi/lock/options.hpp>
#include <kagi/lock/registry.hpp>
#include <kagi/stats/cluster_stats.hpp>
#include <kagi/stats/host_stats.hpp>
#include "admin/offline_status.hpp"

namespace kagi::view {
class Dict;
}

namespace kagi::apps::admin {

// Holds at least this long are "long" (highlighted on the page, `long: true` in JSON).
inline constexpr std::chrono::milliseconds kLongHold{1000};

// The most a status read waits for the lock server (connect + one query). A page view served
// while the server is down or slow takes this long at worst, then shows why it is missing.
inline constexpr std::chrono::milliseconds kClusterReadTimeout{2000};

// One lock name: who holds it and who queues behind it (oldest wait first).
struct LockRow {
  std::string name;
  std::vector<lock::RegistryEntry> holders;
  std::vector<lock::RegistryEntry> waiters;
};

// Every host's holders and waiters, from the lock server the hosts share
// (kagi/lock/cluster_status.hpp). Entries carry `host` and the kagi process's `pid`; their
// `thread`, `slot` and `seq` are unknown (so they cannot be revoked here), and so is
// `client_address` with postgres (kagi-lockd gives each holder's and waiter's address).
struct ClusterLocks {
  std::string backend;     // "postgres" or "lockd"
  size_t hosts = 0;        // distinct kagi hosts connected to the server now
  size_t connections = 0;  // their connections (in use or idle in a pool)
  std::string error;       // non-empty: the server could not be read (why); locks is empty
  // dir: a record is offered for breaking once expired by more than this (the clock-skew
  // margin that break_stale_lock and a contender's takeover apply).
  std::chrono::milliseconds break_margin{0};
  std::vector<LockRow> locks;  // ordered as LockStatus::locks
  // Every host's stats as it last published them (stats/cluster_stats.hpp), by host name.
  std::vector<stats::HostStatsRow> host_stats;
  std::string host_stats_error;  // non-empty: they could not be read (why)
};

struct LockStatus {
  std::chrono::system_clock::time_point now;
  int served_by = 0;           // pid of the process that gathered this
  size_t processes = 0;        // live registry files
  std::vector<LockRow> locks;  // longest-held first; names with only waiters last
  stats::HostStats host;
  // Only for a backend whose locks span hosts; absent for `local`, whose locks are all in
  // `locks` already.
  std::optional<ClusterLocks> cluster;
  // The offline locks sessions hold (admin/offline_status.hpp), when the caller read them.
  std::optional<OfflineStatus> offline;
};

// Reads the registry and the stats files under `locks_dir` (every process on the host) and,
// when `locks` names a backend shared by several hosts, that backend's server with a
// connection of its own, waiting at most `cluster_timeout` for it. A server that cannot be
// read is reported in `cluster->error`; this never throws for it.
LockStatus collect_status(const std::string& locks_dir, const lock::LockOptions& locks,
                          std::chrono::milliseconds cluster_timeout = kClusterReadTimeout);

// Groups registry entries by name, ordered as LockStatus::locks.
std::vector<LockRow> group_entries(std::vector<lock::RegistryEntry> entries);

std::string to_json(const LockStatus& status);
std::string to_prometheus(const LockStatus& status);
std::string to_text(const LockStatus& status);
void fill_dict(const LockStatus& status, view::Dict& dict);

// "850 ms", "2.3 s", "4 min 5 s": a duration for people.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace kagi::apps::admin
