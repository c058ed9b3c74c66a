#include <kagi/app/request_stats.hpp>

namespace kagi {

void RouteStatsSnapshot::add(const RouteStatsSnapshot& other) {
  for (const auto& [status, n] : other.by_status) by_status[status] += n;
  duration.add(other.duration);
}

void RequestStatsSnapshot::add(const RequestStatsSnapshot& other) {
  for (const auto& [route, r] : other.routes) routes[route].add(r);
}

RequestStats::Route& RequestStats::for_route(std::string_view route) {
  {
    util::ReaderLock lock(mu_);
    auto it = routes_.find(route);
    if (it != routes_.end()) return *it->second;
  }
  util::WriterLock lock(mu_);
  auto [it, inserted] = routes_.try_emplace(std::string(route), nullptr);
  if (inserted) it->second = std::make_unique<Route>();
  return *it->second;
}

void RequestStats::record(std::string_view route, int status, std::chrono::nanoseconds took) {
  if (status < 100 || status > 599) status = 500;
  Route& r = for_route(route);
  r.by_status[static_cast<size_t>(status - 100)].fetch_add(1, std::memory_order_relaxed);
  r.duration.record(took);
}

RequestStatsSnapshot RequestStats::snapshot() const {
  RequestStatsSnapshot s;
  util::ReaderLock lock(mu_);
  for (const auto& [route, r] : routes_) {
    RouteStatsSnapshot& out = s.routes[route];
    for (size_t i = 0; i < r->by_status.size(); ++i) {
      if (uint64_t n = r->by_status[i].load(std::memory_order_relaxed)) {
        out.by_status[static_cast<int>(i + 100)] = n;
      }
    }
    out.duration = r->duration.snapshot();
  }
  return s;
}

}  // namespace kagi
