// The admin surfaces with a lock backend that spans hosts: every host's holders and waiters,
// read from a real PostgreSQL (tests/unit/support/pg_cluster.hpp), in /admin/locks.json's
// "cluster", the page's "Across hosts" section, /metrics and kagi-locks' table; nothing of
// it with the local backend; and a lock server that cannot be read shown as an error.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <kagi/app/request_stats.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/stats/cluster_stats.hpp>
#include <kagi/stats/host_stats.hpp>
#include <kagi/view/views.hpp>
#include "../support/pg_cluster.hpp"
#include "../support/temp_dir.hpp"
#include "admin/status.hpp"

namespace kagi::apps::admin {
namespace {

using namespace std::chrono_literals;
using test_support::TempDir;

std::string render_page(const LockStatus& status) {
  static const view::Views views(std::string(KAGI_SOURCE_DIR) + "/templates");
  view::Dict dict;
  fill_dict(status, dict);
  return views.render("admin/locks.html", dict);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What follows "cluster": in the JSON document, so that a check cannot be met by this host's
// own entries in "locks".
std::string cluster_json(const std::string& json) {
  const size_t at = json.find("\"cluster\":");
  return at == std::string::npos ? "" : json.substr(at);
}

class StatusClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KAGI_NEED_POSTGRES(pg);
    pg_ = pg;
  }

  // One web host: its own locks.dir (registry), the shared server, a host name of its own.
  lock::LockOptions host(const std::string& name, int pid) {
    lock::LockOptions o;
    o.backend = "postgres";
    o.dir = dir_.path() + "/" + name;
    o.timeout = 5s;
    o.postgres.dsn = pg_->dsn();
    o.postgres.application_name = "kagi/" + name + "/" + std::to_string(pid);
    return o;
  }

  test_support::PgCluster* pg_ = nullptr;
  TempDir dir_;
};

TEST_F(StatusClusterTest, EveryHostsHolderAndWaiterOnEverySurface) {
  const lock::LockOptions oa = host("host-a", 11), ob = host("host-b", 22);
  auto a = lock::LockService::create(oa);
  auto b = lock::LockService::create(ob);
  auto holder = a->context({"req-a", "POST", "/bbs/3/post", "192.0.2.1"});
  auto guard = holder->exclusive("cl/board");
  std::thread waiter([&] {
    auto w = b->context({"req-b", "GET", "/bbs/3/", "192.0.2.2"});
    // Granted once the holder lets go, below (a LockBusy must fail the test, not end it).
    EXPECT_NO_THROW(w->shared("cl/board"));
  });
  LockStatus status;
  for (int i = 0; i < 400; ++i) {
    status = collect_status(oa.dir, oa);
    if (status.cluster && !status.cluster->locks.empty() &&
        !status.cluster->locks[0].waiters.empty()) {
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  guard.release();
  waiter.join();

  ASSERT_TRUE(status.cluster.has_value());
  const ClusterLocks& c = *status.cluster;
  EXPECT_EQ(c.backend, "postgres");
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.hosts, 2u);
  EXPECT_GE(c.connections, 2u);
  ASSERT_EQ(c.locks.size(), 1u);
  ASSERT_EQ(c.locks[0].holders.size(), 1u);
  ASSERT_EQ(c.locks[0].waiters.size(), 1u);

  const std::string json = cluster_json(to_json(status));
  EXPECT_EQ(json.rfind("\"cluster\":{\"backend\":\"postgres\",\"hosts\":2,\"connections\":", 0), 0u)
      << json;
  EXPECT_NE(json.find("\"error\":null,\"locks\":[{\"name\":\"cl/board\",\"holders\":[{"
                      "\"host\":\"host-a\",\"pid\":11,\"mode\":\"exclusive\","
                      "\"request_id\":\"req-a\",\"method\":\"POST\",\"path\":\"/bbs/3/post\","
                      "\"since\":\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"waiters\":[{\"host\":\"host-b\",\"pid\":22,\"mode\":\"shared\","
                      "\"request_id\":\"req-b\",\"method\":\"GET\",\"path\":\"/bbs/3/\","
                      "\"since\":\""),
            std::string::npos)
      << json;
  EXPECT_EQ(count(json, "\"long\":"), 1u) << "a holder has `long`, a waiter not: " << json;

  const std::string html = render_page(status);
  EXPECT_NE(html.find("<h2>Across hosts (PostgreSQL)</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find("2 hosts with"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"name\">cl/board</td><td>held</td><td>exclusive</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>host-a</td><td>11</td>\n<td>POST /bbs/3/post<br>"
                      "<span class=\"rid\">req-a</span></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"name\">cl/board</td><td>waiting</td><td>shared</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>host-b</td><td>22</td>\n<td>GET /bbs/3/<br>"), std::string::npos)
      << html;
  // Host a's own registry shows its hold with a Revoke button; the server's rows have none.
  EXPECT_EQ(status.locks.size(), 1u);
  EXPECT_EQ(count(html, "action=\"/admin/locks/revoke\""), 1u) << html;
  EXPECT_EQ(html.find("could not be read"), std::string::npos);

  const std::string metrics = to_prometheus(status);
  EXPECT_NE(metrics.find("# TYPE kagi_cluster_up gauge\nkagi_cluster_up 1\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("\nkagi_cluster_hosts 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("# TYPE kagi_cluster_locks_held gauge\n"
                         "kagi_cluster_locks_held{host=\"host-a\"} 1\n"
                         "kagi_cluster_locks_held{host=\"host-b\"} 0\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("# TYPE kagi_cluster_locks_waiting gauge\n"
                         "kagi_cluster_locks_waiting{host=\"host-a\"} 0\n"
                         "kagi_cluster_locks_waiting{host=\"host-b\"} 1\n"),
            std::string::npos)
      << metrics;

  const std::string text = to_text(status);
  const size_t across = text.find("across hosts (PostgreSQL) — 2 host(s)");
  ASSERT_NE(across, std::string::npos) << text;
  EXPECT_NE(text.find("host-a/11", across), std::string::npos) << text;
  EXPECT_NE(text.find("POST /bbs/3/post (req-a)", across), std::string::npos) << text;
  EXPECT_NE(text.find("host-b/22", across), std::string::npos) << text;
  EXPECT_NE(text.find("GET /bbs/3/ (req-b)", across), std::string::npos) << text;

  // Both let go: the server still sees both hosts (their pooled connections), and no lock.
  const LockStatus after = collect_status(oa.dir, oa);
  ASSERT_TRUE(after.cluster.has_value());
  EXPECT_EQ(after.cluster->error, "");
  EXPECT_TRUE(after.cluster->locks.empty());
  EXPECT_NE(to_json(after).find("\"error\":null,\"locks\":[],\"host_stats_error\":null,"),
            std::string::npos);
  EXPECT_NE(render_page(after).find("No lock is held or waited for on any host"),
            std::string::npos);
}

TEST(StatusClusterLocalTest, TheLocalBackendHasNoClusterView) {
  TempDir dir;
  lock::LockOptions local;
  local.dir = dir.path();
  const LockStatus status = collect_status(dir.path(), local);
  EXPECT_FALSE(status.cluster.has_value());
  const std::string json = to_json(status);
  EXPECT_NE(json.find("\"locks\":[],\"cluster\":null,\"stats\":"), std::string::npos) << json;
  const std::string html = render_page(status);
  EXPECT_EQ(html.find("Across hosts"), std::string::npos) << html;
  EXPECT_EQ(html.find("id=\"cluster\""), std::string::npos);
  EXPECT_EQ(to_prometheus(status).find("kagi_cluster_"), std::string::npos);
  EXPECT_EQ(to_text(status).find("across hosts"), std::string::npos);
}

TEST(StatusClusterLocalTest, AServerThatCannotBeReadIsShownAsAnError) {
  TempDir dir;
  lock::LockOptions options;
  options.backend = "postgres";
  options.dir = dir.path();
  options.postgres.dsn = "host=127.0.0.1 port=1 dbname=x user=y";  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  const LockStatus status = collect_status(dir.path(), options, 1s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  ASSERT_TRUE(status.cluster.has_value());
  const std::string error = status.cluster->error;
  ASSERT_NE(error, "");
  EXPECT_TRUE(status.cluster->locks.empty());

  const std::string json = cluster_json(to_json(status));
  EXPECT_EQ(json.rfind("\"cluster\":{\"backend\":\"postgres\",\"hosts\":0,\"connections\":0,"
                       "\"error\":\"",
                       0),
            0u)
      << json;
  EXPECT_NE(json.find("\"locks\":[],\"host_stats_error\":null,\"host_stats\":[]}"),
            std::string::npos)
      << json;

  const std::string html = render_page(status);
  EXPECT_NE(html.find("<h2>Across hosts (PostgreSQL)</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find("<p class=\"notice\">The lock server could not be read: "), std::string::npos)
      << html;
  EXPECT_EQ(html.find("id=\"cluster\""), std::string::npos) << "no table without data";

  const std::string metrics = to_prometheus(status);
  EXPECT_NE(metrics.find("\nkagi_cluster_up 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("kagi_cluster_hosts"), std::string::npos) << "unknown, not zero";
  EXPECT_EQ(metrics.find("kagi_cluster_locks_held"), std::string::npos);

  EXPECT_NE(to_text(status).find("across hosts (PostgreSQL): error: cannot read the lock server: " +
                                 error),
            std::string::npos)
      << to_text(status);
}

// What the server reports goes through the template's escaping like everything else: a host
// name or path with markup in it is shown, not run.
TEST(StatusClusterLocalTest, ValuesFromTheServerAreEscaped) {
  LockStatus status;
  status.now = std::chrono::system_clock::now();
  ClusterLocks& c = status.cluster.emplace();
  c.backend = "postgres";
  c.hosts = 1;
  lock::RegistryEntry e;
  e.host = "<img src=x>";
  e.name = "a/\"b\"";
  e.path = "/<script>";
  e.request_id = "r&1";
  e.since = status.now - 2s;
  c.locks = group_entries({e});
  const std::string html = render_page(status);
  EXPECT_EQ(html.find("<img src=x>"), std::string::npos) << html;
  EXPECT_EQ(html.find("/<script>"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;img src=x&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr class=\"long\">"), std::string::npos) << "held 2 s: " << html;
  EXPECT_NE(to_prometheus(status).find("kagi_cluster_locks_held{host=\"<img src=x>\"} 1\n"),
            std::string::npos);
  EXPECT_NE(to_json(status).find("\"host\":\"\\u003cimg src=x\\u003e\""), std::string::npos)
      << to_json(status);
}

// Each host publishes its sums to the lock server; any host's admin surfaces show every host's
// row, with its own numbers.
TEST_F(StatusClusterTest, EveryHostsStatsOnEverySurface) {
  struct Host {
    lock::LockOptions options;
    std::unique_ptr<lock::LockService> locks;
    RequestStats requests;
    std::unique_ptr<stats::StatsPublisher> files;
    std::unique_ptr<stats::ClusterStatsPublisher> cluster;
  };
  Host hosts[2];
  const char* names[] = {"stats-a", "stats-b"};
  for (int i = 0; i < 2; ++i) {
    Host& h = hosts[i];
    h.options = host(names[i], 30 + i);
    h.locks = lock::LockService::create(h.options);
    h.files = std::make_unique<stats::StatsPublisher>(*h.locks, h.requests,
                                                      stats::StatsPublisher::Options{});
    h.cluster = std::make_unique<stats::ClusterStatsPublisher>(
        h.options.dir, names[i], h.options.postgres, stats::ClusterStatsPublisher::Options{});
    for (int n = 0; n < 3 + 4 * i; ++n) {  // 3 locks on a, 7 on b
      auto r = h.locks->context({"s", "POST", "/x", "192.0.2.1"});
      auto g = r->exclusive("st/" + std::to_string(n));
    }
    h.requests.record("GET /bbs/", 200, 1ms);
    h.files->publish_now();
    ASSERT_TRUE(h.cluster->publish_now());
  }
  const LockStatus status = collect_status(hosts[0].options.dir, hosts[0].options);
  ASSERT_TRUE(status.cluster.has_value());
  const ClusterLocks& c = *status.cluster;
  EXPECT_EQ(c.host_stats_error, "");
  ASSERT_EQ(c.host_stats.size(), 2u);
  EXPECT_EQ(c.host_stats[0].host, "stats-a");
  EXPECT_EQ(c.host_stats[1].host, "stats-b");
  EXPECT_EQ(c.host_stats[0].stats.stats.total().acquisitions, 3u);
  EXPECT_EQ(c.host_stats[1].stats.stats.total().acquisitions, 7u);
  EXPECT_EQ(c.host_stats[1].stats.processes, 1u);

  const std::string json = cluster_json(to_json(status));
  EXPECT_NE(json.find("\"host_stats_error\":null,\"host_stats\":[{\"host\":\"stats-a\""),
            std::string::npos)
      << json;
  const std::string metrics = to_prometheus(status);
  EXPECT_NE(metrics.find("kagi_cluster_host_lock_acquisitions_total{host=\"stats-b\"} 7\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kagi_cluster_host_requests_total{host=\"stats-a\"} 1\n"),
            std::string::npos);
  const std::string text = to_text(status);
  EXPECT_NE(text.find("stats-b                     1      1          7"), std::string::npos)
      << text;
  const std::string html = render_page(status);
  EXPECT_NE(
      html.find("<tr><td class=\"name\">stats-a</td><td>1</td><td>1</td><td>0</td><td>3</td>"),
      std::string::npos)
      << html;
}

// A role that may not see another role's session activity gets no statement time for that
// session's holds (docs/ADMIN.md): shown as unknown, not as held since 1970.
TEST(StatusClusterLocalTest, AHoldWithoutAStartTimeHasNoDuration) {
  LockStatus status;
  status.now = std::chrono::system_clock::now();
  ClusterLocks& c = status.cluster.emplace();
  c.backend = "postgres";
  lock::RegistryEntry e;
  e.host = "web-c";
  e.pid = 5;
  e.name = "bbs/board/3";
  e.mode = lock::Mode::kExclusive;
  e.request_id = "(not kagi)";
  c.locks = group_entries({e});
  const std::string json = to_json(status);
  EXPECT_NE(json.find("\"path\":\"\",\"since\":null,\"for_ms\":null,\"long\":false}"),
            std::string::npos)
      << json;
  const std::string html = render_page(status);
  EXPECT_NE(html.find("<td data-value=\"0\">unknown</td><td>web-c</td><td>5</td>\n<td>—<br>"),
            std::string::npos)
      << html;
  EXPECT_NE(
      to_text(status).find("held     exclusive ?         web-c/5                 (not kagi)\n"),
      std::string::npos)
      << to_text(status);
}

}  // namespace
}  // namespace kagi::apps::admin
