// stats/host_stats.hpp — lock statistics, request counts and notable events summed over every
// kagi process on the host: what an admin page, /metrics and kagi-locks show.
//
// The lock layer counts per process (lock::Stats). Each process that shows host-wide numbers
// (the admin app) runs a StatsPublisher: a thread that, every `interval`, writes that process's
// lock StatsSnapshot, its request counts and latencies (App::requests()), its recent notable
// events and its store's durability statistics (store/store_stats.hpp) to
// <locks.dir>/stats/<stem>.stats (atomic rename, only when something changed) beside
// its <stem>.live, a lock::LiveFile held for the process's life (the same liveness mechanism as
// the lock registry). read_host_stats() sums the .stats file of every live .live; a dead
// process's pair is removed, so its totals drop out ("since start" means since the start of
// the processes alive now).
// Nothing here runs on the acquire path.
//
// Notable events: the lock layer's ring of timeouts, leaks and order violations
// (LockService::recent_events(), with the request's route), and slow holds that the publisher
// sees in the status registry (a lock of this process held longer than `slow_hold`, reported
// once, while it is still held), and the store's damaged log spans (store/damage.hpp; kind
// "log_damage", name = the log's path).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <kagi/app/request_stats.hpp>
#include <kagi/lock/stats.hpp>
#include <kagi/store/store_stats.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock {
class LiveFile;
class LockService;
}  // namespace kagi::lock
namespace kagi::store {
class DamageLog;
class DataStore;
}  // namespace kagi::store

namespace kagi::stats {

struct Event {
  int64_t unix_ms = 0;
  std::string kind;  // "timeout" | "leak" | "order_violation" | "slow_hold" | "log_damage"
  std::string name;  // the lock name
  int pid = 0;
  std::string method, path;  // the route of the request concerned
  std::string detail;        // e.g. "gave up after 3000 ms (request 1f.., 10.0.0.7)"
};

struct HostStats {
  lock::StatsSnapshot stats;      // summed over live processes
  RequestStatsSnapshot requests;  // summed over live processes
  store::StoreStats storage;      // summed over live processes (data.backend = "files")
  std::vector<Event> events;      // newest first, at most kMaxEvents
  size_t processes = 0;           // live stats files read
};

inline constexpr size_t kMaxEvents = 100;

// Adds every counter and histogram bucket of `part` into `total`.
void add_into(lock::StatsSnapshot& total, const lock::StatsSnapshot& part);

// The stats file text and back. decode_stats_file() returns false (and leaves the outputs in
// an unspecified state) for text that is not a complete version-2 stats file. `storage` is
// optional both ways: a file without its line (an older worker's, or one with nothing to
// count) reads as all zeros, and counters after the known ones (a newer worker's) are skipped.
std::string encode_stats_file(const lock::StatsSnapshot& stats,
                              const RequestStatsSnapshot& requests, const std::deque<Event>& events,
                              const store::StoreStats& storage = {});
bool decode_stats_file(std::string_view text, lock::StatsSnapshot& stats,
                       RequestStatsSnapshot& requests, std::vector<Event>& events,
                       store::StoreStats* storage = nullptr);

// Reads <locks_dir>/stats/; removes the files of dead processes. Never throws for a missing
// or unreadable directory (returns empty stats).
HostStats read_host_stats(const std::string& locks_dir);

// Publishes one process's lock and request stats (see the banner). Start it after any fork().
// The destructor stops the thread (within one interval) and removes the files.
class StatsPublisher {
 public:
  struct Options {
    std::chrono::milliseconds interval{250};
    std::chrono::milliseconds slow_hold{1000};
    // Damaged log spans to show with the events (the admin app: store::damage_log()).
    const store::DamageLog* damage = nullptr;
    // The store whose durability statistics are published (the admin app: App::data()).
    const store::DataStore* data = nullptr;
  };
  // Throws std::system_error if the stats directory or the .live file cannot be created.
  StatsPublisher(lock::LockService& locks, const RequestStats& requests, Options options);
  ~StatsPublisher();
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;

  // One publishing step, now (the thread calls it every interval; tests call it directly).
  void publish_now() KAGI_EXCLUDES(publish_mu_);

 private:
  void run() KAGI_EXCLUDES(mu_);
  void collect_slow_holds() KAGI_REQUIRES(publish_mu_);

  lock::LockService& locks_;
  const RequestStats& requests_;
  Options options_;
  std::string dir_;
  std::unique_ptr<lock::LiveFile> live_;  // held for the process's life: its stats are current
  util::Mutex publish_mu_;                // serialises publish_now()
  std::deque<Event> slow_holds_ KAGI_GUARDED_BY(publish_mu_);         // newest first
  std::set<std::string> slow_reported_ KAGI_GUARDED_BY(publish_mu_);  // holds already reported
  std::string last_text_ KAGI_GUARDED_BY(publish_mu_);
  util::Mutex mu_;
  util::CondVar cv_;  // stop_ was set
  bool stop_ KAGI_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kagi::stats
