#include "admin/status.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace kagi::apps::admin {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

lock::RegistryEntry entry(std::string name, bool waiting, system_clock::time_point since,
                          std::string request_id) {
  lock::RegistryEntry e;
  e.name = std::move(name);
  e.mode = lock::Mode::kExclusive;
  e.waiting = waiting;
  e.request_id = std::move(request_id);
  e.method = "GET";
  e.path = "/p";
  e.client_address = "127.0.0.1";
  e.pid = 7;
  e.thread = 8;
  e.since = since;
  return e;
}

TEST(GroupEntriesTest, LongestHeldFirstWaitersInArrivalOrder) {
  // The names' alphabetical order (the grouping map's order) is neither the holding order nor
  // the input order, so only the sort by holding time can produce the expected rows.
  const auto t0 = system_clock::now();
  auto rows = group_entries({
      entry("m", false, t0 - milliseconds(100), "hm"),
      entry("z", true, t0 - milliseconds(10), "w2"),
      entry("y", true, t0, "wy"),  // nobody shown holding it (e.g. a registry overflow)
      entry("z", false, t0 - milliseconds(500), "hz"),
      entry("a", false, t0 - milliseconds(20), "ha"),
      entry("z", true, t0 - milliseconds(50), "w1"),
      entry("b", true, t0, "wb"),
  });
  std::vector<std::string> names;
  for (const LockRow& row : rows) names.push_back(row.name);
  // Held longest first; then the names with only waiters, kept in name order.
  EXPECT_EQ(names, (std::vector<std::string>{"z", "m", "a", "b", "y"}));
  ASSERT_EQ(rows.size(), 5u);
  ASSERT_EQ(rows[0].holders.size(), 1u);
  EXPECT_EQ(rows[0].holders[0].request_id, "hz");
  ASSERT_EQ(rows[0].waiters.size(), 2u);
  EXPECT_EQ(rows[0].waiters[0].request_id, "w1");
  EXPECT_EQ(rows[0].waiters[1].request_id, "w2");
}

LockStatus sample_status() {
  LockStatus s;
  s.now = system_clock::now();
  s.served_by = 99;
  s.processes = 2;
  s.locks = group_entries({entry("bbs/board/3", false, s.now - milliseconds(2500), "r1"),
                           entry("bbs/board/3", true, s.now - milliseconds(300), "r2")});
  lock::PrefixStatsSnapshot& p = s.host.stats.prefixes["bbs/\"board\""];
  p.acquisitions = 3;
  p.contended = 1;
  p.wait.count = 3;
  p.wait.sum_us = 1500000;
  p.wait.buckets[0] = 2;
  p.wait.buckets[25] = 1;  // the unbounded bucket
  s.host.processes = 2;
  RequestStats requests;
  requests.record("GET /bbs/{board}/", 200, milliseconds(3));
  requests.record("GET /bbs/{board}/", 200, milliseconds(5));
  requests.record("POST /bbs/{board}/post", 503, milliseconds(300));
  s.host.requests = requests.snapshot();
  return s;
}

TEST(ToJsonTest, HasHolderWaiterAndStats) {
  const std::string json = to_json(sample_status());
  EXPECT_NE(json.find("\"served_by\":{\"pid\":99}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"name\":\"bbs/board/3\",\"holders\":[{\"mode\":\"exclusive\","
                      "\"request_id\":\"r1\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"waiters\":[{\"mode\":\"exclusive\",\"request_id\":\"r2\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"long\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"acquisitions\":3,\"contended\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"route\":\"GET /bbs/{board}/\",\"total\":2,\"statuses\":{\"200\":2},"
                      "\"duration\":{\"count\":2,\"sum_us\":8000"),
            std::string::npos)
      << json;
}

// Every sample line of the exposition: name{labels} value.
std::vector<std::string> samples(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

TEST(ToPrometheusTest, CumulativeBucketsEndInInfEqualToCount) {
  const std::string text = to_prometheus(sample_status());
  auto buckets = samples(text, "kagi_lock_wait_seconds_bucket{");
  ASSERT_EQ(buckets.size(), lock::kHistogramBuckets);
  EXPECT_EQ(buckets.front(),
            "kagi_lock_wait_seconds_bucket{prefix=\"bbs/\\\"board\\\"\","
            "le=\"1e-06\"} 2");
  EXPECT_EQ(buckets[buckets.size() - 2],
            "kagi_lock_wait_seconds_bucket{prefix=\"bbs/\\\"board\\\"\",le=\"16.777216\"} 2");
  EXPECT_EQ(buckets.back(),
            "kagi_lock_wait_seconds_bucket{prefix=\"bbs/\\\"board\\\"\","
            "le=\"+Inf\"} 3");
  EXPECT_NE(text.find("kagi_lock_wait_seconds_sum{prefix=\"bbs/\\\"board\\\"\"} 1.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("kagi_lock_acquisitions_total{prefix=\"bbs/\\\"board\\\"\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("kagi_lock_held{prefix=\"bbs/board\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kagi_lock_waiting{prefix=\"bbs/board\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE kagi_lock_hold_seconds histogram\n"), std::string::npos);
}

TEST(ToPrometheusTest, RequestCountsAndLatenciesPerRoute) {
  const std::string text = to_prometheus(sample_status());
  EXPECT_NE(text.find("kagi_requests_total{route=\"GET /bbs/{board}/\",code=\"200\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kagi_requests_total{route=\"POST /bbs/{board}/post\",code=\"503\"} 1\n"),
            std::string::npos);
  auto buckets = samples(text, "kagi_request_duration_seconds_bucket{route=\"GET /bbs/{board}/\"");
  ASSERT_EQ(buckets.size(), util::kHistogramBuckets);
  EXPECT_EQ(buckets.back(),
            "kagi_request_duration_seconds_bucket{route=\"GET /bbs/{board}/\",le=\"+Inf\"} 2");
  EXPECT_NE(text.find("kagi_request_duration_seconds_sum{route=\"GET /bbs/{board}/\"} 0.008\n"),
            std::string::npos)
      << text;
}

TEST(StorageTest, JsonAndMetricsShowTheStoresCounters) {
  LockStatus status = sample_status();
  status.host.storage = {.rounds = 4,
                         .round_requests = 10,
                         .round_flush_us = 1500,
                         .flushes = 4,
                         .journal_rounds = 3,
                         .journal_checkpoints = 1,
                         .syncfs_declined = 0,
                         .replayed = 2};
  const std::string json = to_json(status);
  EXPECT_NE(json.find("\"storage\":{\"rounds\":4,\"round_requests\":10,\"round_flush_us\":1500,"
                      "\"flushes\":4,\"journal_rounds\":3,\"journal_checkpoints\":1,"
                      "\"syncfs_declined\":0,\"replayed\":2}"),
            std::string::npos)
      << json;
  const std::string text = to_prometheus(status);
  EXPECT_NE(text.find("# TYPE kagi_store_rounds_total counter\nkagi_store_rounds_total 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nkagi_store_round_flush_seconds_total 0.0015\n"), std::string::npos);
  EXPECT_NE(text.find("\nkagi_store_replayed_total 2\n"), std::string::npos);
  // Nothing durable yet: zeros, not missing series.
  EXPECT_NE(to_prometheus(sample_status()).find("\nkagi_store_rounds_total 0\n"),
            std::string::npos);
}

TEST(ToTextTest, ListsHolderAndWaiter) {
  const std::string text = to_text(sample_status());
  EXPECT_NE(text.find("bbs/board/3"), std::string::npos);
  EXPECT_NE(text.find("held"), std::string::npos);
  EXPECT_NE(text.find("waiting"), std::string::npos);
  EXPECT_NE(text.find("2.5 s"), std::string::npos) << text;
  EXPECT_NE(text.find("(r2, 127.0.0.1)"), std::string::npos);
  LockStatus empty;
  EXPECT_NE(to_text(empty).find("no locks held"), std::string::npos);
}

TEST(FormatDurationTest, PicksAReadableUnit) {
  EXPECT_EQ(format_duration(milliseconds(0)), "0 ms");
  EXPECT_EQ(format_duration(milliseconds(999)), "999 ms");
  EXPECT_EQ(format_duration(milliseconds(2345)), "2.3 s");
  EXPECT_EQ(format_duration(milliseconds(125000)), "2 min 5 s");
  EXPECT_EQ(format_duration(milliseconds(-5)), "0 ms");
}

}  // namespace
}  // namespace kagi::apps::admin
