// Revocations on the admin surfaces: the per-prefix count in JSON, /metrics and the stats
// files the workers share, and the registry record (slot, seq) the Revoke button posts.
#include <gtest/gtest.h>

#include <string>

#include <kagi/stats/host_stats.hpp>
#include "admin/status.hpp"

namespace kagi::apps::admin {
namespace {

LockStatus status_with_revocation() {
  LockStatus s;
  s.now = std::chrono::system_clock::now();
  lock::RegistryEntry e;
  e.name = "bbs/board/3";
  e.mode = lock::Mode::kExclusive;
  e.pid = 7;
  e.slot = 5;
  e.seq = 42;
  e.since = s.now;
  s.locks = group_entries({e});
  s.host.stats.prefixes["bbs/board"].revocations = 3;
  return s;
}

TEST(RevokeStatusTest, JsonShowsTheRecordAndTheCount) {
  const std::string json = to_json(status_with_revocation());
  EXPECT_NE(json.find("\"slot\":5,\"seq\":42"), std::string::npos) << json;
  EXPECT_NE(json.find("\"leaks\":0,\"revocations\":3"), std::string::npos) << json;
}

TEST(RevokeStatusTest, PrometheusCountsRevocationsPerPrefix) {
  const std::string text = to_prometheus(status_with_revocation());
  EXPECT_NE(text.find("# TYPE kagi_lock_revocations_total counter\n"
                      "kagi_lock_revocations_total{prefix=\"bbs/board\"} 3\n"),
            std::string::npos)
      << text;
}

TEST(RevokeStatusTest, StatsFilesCarryRevocationsAndStillReadTheOlderLayout) {
  lock::StatsSnapshot stats;
  stats.prefixes["bbs/board"].revocations = 3;
  stats.prefixes["bbs/board"].leaks = 1;
  const std::string text = stats::encode_stats_file(stats, {}, {});
  lock::StatsSnapshot back;
  RequestStatsSnapshot requests;
  std::vector<stats::Event> events;
  ASSERT_TRUE(stats::decode_stats_file(text, back, requests, events)) << text;
  EXPECT_EQ(back.prefixes["bbs/board"].revocations, 3u);
  EXPECT_EQ(back.prefixes["bbs/board"].leaks, 1u);

  // A worker still running the previous build writes the line without the last field.
  std::string older = text;
  const size_t line = older.find("p\tbbs/board\t");
  ASSERT_NE(line, std::string::npos);
  const size_t end = older.find('\n', line);
  const size_t last_tab = older.rfind('\t', end);
  older.erase(last_tab, end - last_tab);
  lock::StatsSnapshot old_back;
  ASSERT_TRUE(stats::decode_stats_file(older, old_back, requests, events)) << older;
  EXPECT_EQ(old_back.prefixes["bbs/board"].revocations, 0u);
  EXPECT_EQ(old_back.prefixes["bbs/board"].leaks, 1u);
}

}  // namespace
}  // namespace kagi::apps::admin
