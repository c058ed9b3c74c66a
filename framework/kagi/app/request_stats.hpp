// app/request_stats.hpp — request counts per route and status code, and latency histograms
// per route, counted by the pipeline as each response is finished (for /metrics and the admin
// page; see docs/ADMIN.md).
//
// A route is "<METHOD> <pattern>" as registered ("GET /bbs/{board}/"; HEAD counts under its
// GET route), so the number of keys is bounded by the routing table, not by the URLs clients
// send. Requests that matched no route (404, 405, 400 before routing, 413/431 from a front
// end) count under kNoRoute. Latency runs from arrival to the finished response, so a parked
// long-poll counts the time it was parked.
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

#include <kagi/util/histogram.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi {

inline constexpr std::string_view kNoRoute = "(no route)";

struct RouteStatsSnapshot {
  std::map<int, uint64_t> by_status;  // status code → responses (only codes seen)
  util::HistogramSnapshot duration;   // arrival → finished response
  uint64_t total() const { return duration.count; }
  void add(const RouteStatsSnapshot& other);
};

struct RequestStatsSnapshot {
  std::map<std::string, RouteStatsSnapshot> routes;  // sorted by route
  void add(const RequestStatsSnapshot& other);
};

// Thread-safe; record() takes a reader lock and a few relaxed atomic adds.
class RequestStats {
 public:
  RequestStats() = default;
  RequestStats(const RequestStats&) = delete;
  RequestStats& operator=(const RequestStats&) = delete;

  // `status` outside 100..599 counts as 500 (a front end never sends one).
  void record(std::string_view route, int status, std::chrono::nanoseconds took) KAGI_EXCLUDES(mu_);
  RequestStatsSnapshot snapshot() const KAGI_EXCLUDES(mu_);

 private:
  struct Route {
    std::array<std::atomic<uint64_t>, 500> by_status{};  // index: status - 100
    util::Histogram duration;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // The map only grows and a Route never moves, so the reference outlives the lock.
  Route& for_route(std::string_view route) KAGI_EXCLUDES(mu_);

  mutable util::SharedMutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Route>, Hash, std::equal_to<>> routes_
      KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi
