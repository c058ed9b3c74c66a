// stats/cluster_stats.hpp — every web host's stats in one place, for a site whose hosts share
// a PostgreSQL lock server (locks.backend = "postgres").
//
// Each host sums its processes' stats files (host_stats.hpp); across hosts there are no shared
// files, so each host's admin processes also publish that sum to the table kagi_host_stats on
// the lock server (one row per host, replaced in place; UNLOGGED: it is a cache, rebuilt within
// one interval after a server restart), on the same interval as the stats files, writing only
// when the text changed or every kHeartbeat. Any host's admin page then reads every row that is
// fresh (updated within kFresh: a host that stopped publishing drops out).
//
//   ClusterStatsPublisher publisher(locks_dir, host, connect_options, {});  // a thread
//   std::vector<HostStatsRow> rows = read_cluster_stats(connect_options, timeout, &error);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <kagi/pg/options.hpp>
#include <kagi/stats/host_stats.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::pg {
class Connection;
}

namespace kagi::stats {

inline constexpr std::chrono::seconds kHeartbeat{5};
inline constexpr std::chrono::seconds kFresh{15};

// One host's row: its name (as in application_name), how old the row is, and its sums.
struct HostStatsRow {
  std::string host;
  int64_t age_ms = 0;
  HostStats stats;
};

// The fresh rows, ordered by host. On failure: empty, with `error` saying why (a server that
// cannot be reached, a table not made yet is no error: no rows).
std::vector<HostStatsRow> read_cluster_stats(const pg::ConnectOptions& options,
                                             std::chrono::milliseconds timeout, std::string* error);

class ClusterStatsPublisher {
 public:
  struct Options {
    std::chrono::milliseconds interval{250};
    std::chrono::milliseconds timeout{2000};  // connect + one statement
  };
  // Starts the thread; connects lazily (a server that is down only delays the rows).
  ClusterStatsPublisher(std::string locks_dir, std::string host, pg::ConnectOptions connect,
                        Options options);
  ~ClusterStatsPublisher();
  ClusterStatsPublisher(const ClusterStatsPublisher&) = delete;
  ClusterStatsPublisher& operator=(const ClusterStatsPublisher&) = delete;

  // One step, now (the thread calls it every interval; tests call it directly). True if the
  // row is current on the server.
  bool publish_now() KAGI_EXCLUDES(publish_mu_);

 private:
  void run() KAGI_EXCLUDES(mu_);

  const std::string locks_dir_;
  const std::string host_;
  const pg::ConnectOptions connect_;
  const Options options_;
  util::Mutex publish_mu_;  // serialises publish_now()
  std::unique_ptr<pg::Connection> conn_ KAGI_GUARDED_BY(publish_mu_);
  std::string last_text_ KAGI_GUARDED_BY(publish_mu_);
  std::chrono::steady_clock::time_point last_write_ KAGI_GUARDED_BY(publish_mu_);
  std::chrono::steady_clock::time_point retry_at_ KAGI_GUARDED_BY(publish_mu_);
  util::Mutex mu_;
  util::CondVar cv_;
  bool stop_ KAGI_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kagi::stats
