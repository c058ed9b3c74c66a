#include <kagi/app/request_stats.hpp>

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kagi {
namespace {

using namespace std::chrono_literals;

TEST(RequestStatsTest, CountsPerRouteAndStatus) {
  RequestStats stats;
  stats.record("GET /bbs/{board}/", 200, 3ms);
  stats.record("GET /bbs/{board}/", 200, 5ms);
  stats.record("GET /bbs/{board}/", 503, 300ms);
  stats.record(kNoRoute, 404, 10us);
  RequestStatsSnapshot s = stats.snapshot();
  ASSERT_EQ(s.routes.size(), 2u);
  const RouteStatsSnapshot& board = s.routes.at("GET /bbs/{board}/");
  EXPECT_EQ(board.total(), 3u);
  EXPECT_EQ(board.by_status.at(200), 2u);
  EXPECT_EQ(board.by_status.at(503), 1u);
  EXPECT_EQ(board.duration.sum_us, 308000u);
  EXPECT_EQ(s.routes.at(std::string(kNoRoute)).by_status.at(404), 1u);
}

TEST(RequestStatsTest, ImpossibleStatusesCountAs500) {
  RequestStats stats;
  stats.record("GET /x", 42, 1ms);
  stats.record("GET /x", 1000, 1ms);
  RequestStatsSnapshot s = stats.snapshot();
  EXPECT_EQ(s.routes.at("GET /x").by_status.size(), 1u);
  EXPECT_EQ(s.routes.at("GET /x").by_status.at(500), 2u);
}

TEST(RequestStatsTest, SnapshotsAdd) {
  RequestStats a, b;
  a.record("GET /x", 200, 1ms);
  b.record("GET /x", 200, 1ms);
  b.record("POST /y", 303, 1ms);
  RequestStatsSnapshot sum = a.snapshot();
  sum.add(b.snapshot());
  EXPECT_EQ(sum.routes.at("GET /x").by_status.at(200), 2u);
  EXPECT_EQ(sum.routes.at("GET /x").total(), 2u);
  EXPECT_EQ(sum.routes.at("POST /y").total(), 1u);
}

TEST(RequestStatsTest, ConcurrentRecordsAreAllCounted) {
  RequestStats stats;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&stats, t] {
      for (int i = 0; i < 10000; ++i) stats.record("GET /r" + std::to_string(i % 3), 200 + t, 1us);
    });
  }
  for (auto& t : threads) t.join();
  uint64_t total = 0;
  for (const auto& [route, r] : stats.snapshot().routes) total += r.total();
  EXPECT_EQ(total, 40000u);
}

}  // namespace
}  // namespace kagi
