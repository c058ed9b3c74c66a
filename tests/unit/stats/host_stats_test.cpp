#include <kagi/stats/host_stats.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include <kagi/lock/lock_service.hpp>
#include <kagi/store/damage.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/durable_scope.hpp>
#include "../support/temp_dir.hpp"

namespace kagi::stats {
namespace {

using test_support::TempDir;

lock::StatsSnapshot sample(uint64_t acquisitions) {
  lock::StatsSnapshot s;
  lock::PrefixStatsSnapshot& p = s.prefixes["bbs/board"];
  p.acquisitions = acquisitions;
  p.contended = 1;
  p.timeouts = 2;
  p.order_violations = 3;
  p.leaks = 4;
  p.wait.count = 5;
  p.wait.sum_us = 600;
  p.wait.buckets[3] = 5;
  p.hold.count = 1;
  p.hold.sum_us = 2000000;
  p.hold.buckets[21] = 1;
  return s;
}

RequestStatsSnapshot sample_requests() {
  RequestStats stats;
  stats.record("GET /bbs/{board}/", 200, std::chrono::milliseconds(3));
  stats.record("GET /bbs/{board}/", 503, std::chrono::milliseconds(300));
  stats.record(kNoRoute, 404, std::chrono::microseconds(20));
  return stats.snapshot();
}

TEST(StatsFileTest, RoundTripsCountersHistogramsRequestsAndEvents) {
  std::deque<Event> events{{1700000000123, "slow_hold", "bbs/board/3", 42, "POST",
                            "/bbs/3/post\twith tab", "held over 1500 ms"}};
  const std::string text = encode_stats_file(sample(7), sample_requests(), events);
  lock::StatsSnapshot back;
  RequestStatsSnapshot back_requests;
  std::vector<Event> back_events;
  ASSERT_TRUE(decode_stats_file(text, back, back_requests, back_events));
  ASSERT_EQ(back_requests.routes.size(), 2u);
  const RouteStatsSnapshot& board = back_requests.routes["GET /bbs/{board}/"];
  EXPECT_EQ(board.by_status.at(200), 1u);
  EXPECT_EQ(board.by_status.at(503), 1u);
  EXPECT_EQ(board.duration.count, 2u);
  EXPECT_EQ(board.duration.sum_us, 303000u);
  EXPECT_EQ(back_requests.routes[std::string(kNoRoute)].by_status[404], 1u);
  ASSERT_EQ(back.prefixes.count("bbs/board"), 1u);
  const auto& p = back.prefixes["bbs/board"];
  EXPECT_EQ(p.acquisitions, 7u);
  EXPECT_EQ(p.leaks, 4u);
  EXPECT_EQ(p.wait.buckets[3], 5u);
  EXPECT_EQ(p.hold.sum_us, 2000000u);
  ASSERT_EQ(back_events.size(), 1u);
  EXPECT_EQ(back_events[0].unix_ms, 1700000000123);
  EXPECT_EQ(back_events[0].path, "/bbs/3/post with tab");  // a tab cannot split the record
  EXPECT_EQ(back_events[0].pid, 42);
}

TEST(StatsFileTest, RoundTripsTheStoresCountersAndReadsAFileWithoutThemAsZeros) {
  const store::StoreStats storage{.rounds = 1,
                                  .round_requests = 2,
                                  .round_flush_us = 3,
                                  .flushes = 4,
                                  .journal_rounds = 5,
                                  .journal_checkpoints = 6,
                                  .syncfs_declined = 7,
                                  .replayed = 8};
  lock::StatsSnapshot s;
  RequestStatsSnapshot r;
  std::vector<Event> e;
  store::StoreStats back;
  const std::string text = encode_stats_file(sample(7), sample_requests(), {}, storage);
  ASSERT_TRUE(decode_stats_file(text, s, r, e, &back)) << text;
  EXPECT_EQ(back, storage);
  // Nothing to count: no line, which an older reader (before the line) still reads.
  const std::string none = encode_stats_file(sample(7), sample_requests(), {});
  EXPECT_EQ(none.find("\ns\t"), std::string::npos) << none;
  back.rounds = 99;
  ASSERT_TRUE(decode_stats_file(none, s, r, e, &back));
  EXPECT_EQ(back, store::StoreStats{}) << "a file without the line reads as zeros";
  std::string bad = text;
  bad.replace(bad.find("\ns\t1\t"), 5, "\ns\tx\t");
  EXPECT_FALSE(decode_stats_file(bad, s, r, e, &back));
  std::string newer = text;  // a newer worker's line, with a counter after ours
  newer.replace(newer.find("\t8\n"), 3, "\t8\t9\n");
  ASSERT_TRUE(decode_stats_file(newer, s, r, e, &back)) << newer;
  EXPECT_EQ(back, storage);
  std::string short_line = text;
  short_line.replace(short_line.find("\t8\n"), 2, "");
  EXPECT_FALSE(decode_stats_file(short_line, s, r, e, &back));
}

TEST(StatsFileTest, RejectsTornOrForeignText) {
  const std::string text = encode_stats_file(sample(7), sample_requests(), {});
  lock::StatsSnapshot s;
  RequestStatsSnapshot r;
  std::vector<Event> e;
  EXPECT_TRUE(decode_stats_file(text, s, r, e));
  EXPECT_FALSE(decode_stats_file(text.substr(0, text.size() - 4), s, r, e));  // no "end"
  EXPECT_FALSE(decode_stats_file(text.substr(0, text.size() / 2), s, r, e));
  EXPECT_FALSE(decode_stats_file("hello\n", s, r, e));
  EXPECT_FALSE(decode_stats_file(text + "extra\n", s, r, e));
  std::string bad_status = text;
  bad_status.replace(bad_status.find("200="), 4, "2x0=");
  EXPECT_FALSE(decode_stats_file(bad_status, s, r, e));
  std::string version1 = text;
  version1.replace(version1.find("\t2\n"), 3, "\t1\n");
  EXPECT_FALSE(decode_stats_file(version1, s, r, e)) << "an older worker's file is skipped";
}

// The encoder writes no carriage return and no name over 512 bytes (clean()); a file that holds
// one was not written by a worker. Read as it stood, such a name sorted and merged differently
// once written again, so a reader's totals depended on the bytes' history (found by the fuzzer).
TEST(StatsFileTest, RejectsNamesTheEncoderCannotHaveWritten) {
  const std::string text = encode_stats_file(sample(7), sample_requests(), {});
  lock::StatsSnapshot s;
  RequestStatsSnapshot r;
  std::vector<Event> e;
  std::string carriage_return = text;
  carriage_return.replace(carriage_return.find("bbs/board"), 9, "bbs/\rboard");
  EXPECT_FALSE(decode_stats_file(carriage_return, s, r, e));
  std::string long_route = text;
  long_route.replace(long_route.find("GET /bbs/{board}/"), 17, std::string(513, 'a'));
  EXPECT_FALSE(decode_stats_file(long_route, s, r, e));
  std::string longest_route = text;
  longest_route.replace(longest_route.find("GET /bbs/{board}/"), 17, std::string(512, 'a'));
  EXPECT_TRUE(decode_stats_file(longest_route, s, r, e));
  const std::string event_line = "e\t1700000000123\tslow_hold\tbbs/board/3\t42\tPOST\t/p\r\tx\n";
  std::string event_ok = text;
  event_ok.insert(event_ok.find("end\n"),
                  "e\t1700000000123\tslow_hold\tbbs/board/3\t42\tPOST\t/p\tx\n");
  EXPECT_TRUE(decode_stats_file(event_ok, s, r, e));
  std::string event_cr = text;
  event_cr.insert(event_cr.find("end\n"), event_line);
  EXPECT_FALSE(decode_stats_file(event_cr, s, r, e));
}

TEST(AddIntoTest, SumsEveryCounterAndBucket) {
  lock::StatsSnapshot total;
  add_into(total, sample(1));
  add_into(total, sample(2));
  const auto& p = total.prefixes["bbs/board"];
  EXPECT_EQ(p.acquisitions, 3u);
  EXPECT_EQ(p.contended, 2u);
  EXPECT_EQ(p.wait.count, 10u);
  EXPECT_EQ(p.wait.buckets[3], 10u);
  EXPECT_EQ(p.hold.buckets[21], 2u);
}

std::unique_ptr<lock::LockService> service(const std::string& dir) {
  lock::LockOptions options;
  options.dir = dir;
  return lock::LockService::create(options);
}

TEST(StatsPublisherTest, PublishesThisProcessAndCleansUpOnDestruction) {
  TempDir dir;
  auto locks = service(dir.path() + "/locks");
  {
    RequestStats requests;
    StatsPublisher publisher(*locks, requests, {std::chrono::milliseconds(60000), {}});
    {
      auto ctx = locks->context({"r1", "GET", "/t", "127.0.0.1"});
      auto guard = ctx->exclusive("test/a");
    }
    requests.record("GET /t", 200, std::chrono::milliseconds(1));
    publisher.publish_now();
    HostStats host = read_host_stats(dir.path() + "/locks");
    EXPECT_EQ(host.processes, 1u);
    ASSERT_EQ(host.stats.prefixes.count("test"), 1u);
    EXPECT_EQ(host.stats.prefixes["test"].acquisitions, 1u);
    EXPECT_EQ(host.requests.routes["GET /t"].by_status[200], 1u);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() + "/locks/stats"));
  EXPECT_EQ(read_host_stats(dir.path() + "/locks").processes, 0u);
}

TEST(StatsPublisherTest, ItsThreadPublishesWhileLocksAreTaken) {
  TempDir dir;
  auto locks = service(dir.path() + "/locks");
  RequestStats requests;
  StatsPublisher publisher(*locks, requests,
                           {std::chrono::milliseconds(5), std::chrono::milliseconds(1)});
  auto ctx = locks->context({"r1", "GET", "/t", "127.0.0.1"});
  for (int i = 0; i < 50; ++i) (void)ctx->exclusive("busy/a");
  // The thread writes within a few intervals; the deadline is generous for loaded machines.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t seen = 0;
  while (seen != 50 && std::chrono::steady_clock::now() < deadline) {
    HostStats host = read_host_stats(dir.path() + "/locks");
    seen = host.stats.prefixes["busy"].acquisitions;
    if (seen != 50) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(seen, 50u);
}

TEST(StatsPublisherTest, ReportsSlowHoldsOnceWithTheirRoute) {
  TempDir dir;
  auto locks = service(dir.path() + "/locks");
  RequestStats requests;
  StatsPublisher publisher(*locks, requests,
                           {std::chrono::milliseconds(60000), std::chrono::milliseconds(0)});
  auto ctx = locks->context({"r9", "POST", "/bbs/3/post", "10.0.0.1"});
  auto guard = ctx->exclusive("bbs/board/3");
  publisher.publish_now();
  publisher.publish_now();
  HostStats host = read_host_stats(dir.path() + "/locks");
  ASSERT_EQ(host.events.size(), 1u);
  EXPECT_EQ(host.events[0].kind, "slow_hold");
  EXPECT_EQ(host.events[0].name, "bbs/board/3");
  EXPECT_EQ(host.events[0].method, "POST");
  EXPECT_EQ(host.events[0].path, "/bbs/3/post");
  EXPECT_EQ(host.events[0].pid, ::getpid());
}

TEST(StatsPublisherTest, PublishesTheLockLayersTimeoutsWithTheirRoute) {
  TempDir dir;
  auto locks = service(dir.path() + "/locks");
  RequestStats requests;
  StatsPublisher publisher(*locks, requests,
                           {std::chrono::milliseconds(60000), std::chrono::hours(1)});
  auto a = locks->context({"ra", "POST", "/bbs/3/post", "10.0.0.1"});
  auto b = locks->context({"rb", "GET", "/bbs/3/", "10.0.0.2"});
  auto guard = a->exclusive("bbs/board/3");
  EXPECT_ANY_THROW((void)b->shared("bbs/board/3", std::chrono::milliseconds(10)));
  publisher.publish_now();
  HostStats host = read_host_stats(dir.path() + "/locks");
  ASSERT_EQ(host.events.size(), 1u);
  EXPECT_EQ(host.events[0].kind, "timeout");
  EXPECT_EQ(host.events[0].name, "bbs/board/3");
  EXPECT_EQ(host.events[0].method, "GET");
  EXPECT_EQ(host.events[0].path, "/bbs/3/");
  EXPECT_NE(host.events[0].detail.find("rb"), std::string::npos) << host.events[0].detail;
  EXPECT_EQ(host.stats.prefixes["bbs/board"].timeouts, 1u);
}

TEST(StatsPublisherTest, PublishesDamagedLogSpans) {
  TempDir dir;
  auto locks = service(dir.path() + "/locks");
  RequestStats requests;
  store::DamageLog damage;
  StatsPublisher publisher(*locks, requests,
                           {std::chrono::milliseconds(60000), std::chrono::hours(1), &damage});
  damage.record(store::DamageEvent{{}, "bbs/boards/general.log", 4096, 57});
  publisher.publish_now();
  HostStats host = read_host_stats(dir.path() + "/locks");
  ASSERT_EQ(host.events.size(), 1u);
  EXPECT_EQ(host.events[0].kind, "log_damage");
  EXPECT_EQ(host.events[0].name, "bbs/boards/general.log");
  EXPECT_NE(host.events[0].detail.find("57 damaged bytes at offset 4096"), std::string::npos)
      << host.events[0].detail;
}

// The admin app's publisher carries its store's durability counters (store_stats.hpp) to the
// host's sums: a durable append to an existing log is one group commit round.
TEST(StatsPublisherTest, PublishesItsStoresDurabilityCounters) {
  TempDir dir;
  auto locks = service(dir.path() + "/locks");
  std::error_code ec;
  auto data = store::DataDir::open({.dir = dir.path() + "/data", .fsync = true}, ec);
  ASSERT_TRUE(data) << ec.message();
  RequestStats requests;
  StatsPublisher publisher(*locks, requests,
                           {.interval = std::chrono::milliseconds(60000), .data = data.get()});
  {
    auto ctx = locks->context({"r1", "POST", "/t", "127.0.0.1"});
    auto guard = ctx->exclusive("test/log");
    ASSERT_TRUE(data->append(guard, "test.log", "created").ok());  // a new log: flushed at once
  }
  {
    store::DurableScope durable;  // as the App answers a request: one group commit round
    {
      auto ctx = locks->context({"r2", "POST", "/t", "127.0.0.1"});
      auto guard = ctx->exclusive("test/log");
      ASSERT_TRUE(data->append(guard, "test.log", "durable").ok());
    }
    ASSERT_TRUE(durable.wait().ok());
  }
  const store::StoreStats own = data->store_stats();
  EXPECT_GE(own.rounds, 1u);
  EXPECT_GE(own.round_requests, own.rounds);
  EXPECT_GE(own.flushes, 1u);
  publisher.publish_now();
  EXPECT_EQ(read_host_stats(dir.path() + "/locks").storage, own);
}

TEST(ReadHostStatsTest, RemovesFilesOfDeadProcesses) {
  TempDir dir;
  const std::string stats = dir.path() + "/stats";
  ASSERT_EQ(::mkdir(stats.c_str(), 0755), 0);
  // A .live file nobody holds a lock on: its process is gone.
  dir.write("stats/1-1.live", "");
  dir.write("stats/1-1.stats", encode_stats_file(sample(5), {}, {}));
  HostStats host = read_host_stats(dir.path());
  EXPECT_EQ(host.processes, 0u);
  EXPECT_TRUE(host.stats.prefixes.empty());
  EXPECT_FALSE(std::filesystem::exists(stats + "/1-1.stats"));
  EXPECT_FALSE(std::filesystem::exists(stats + "/1-1.live"));
}

TEST(ReadHostStatsTest, MissingDirectoryIsEmpty) {
  HostStats host = read_host_stats("/nonexistent/kagi-admin-test");
  EXPECT_EQ(host.processes, 0u);
}

}  // namespace
}  // namespace kagi::stats
