// The lockd backend's holders and waiters on every surface of the admin app: /admin/locks.json
// ("cluster" with each entry's client address), the page's "Across hosts (kagi-lockd)" section
// with its Client column, /metrics and kagi-locks' table. (Reading them from a real kagi-lockd
// is tests/unit/lock/lockd_backend_test.cpp and tests/integration/lockd/lru_test.py.)
#include <gtest/gtest.h>

#include <string>

#include <kagi/view/views.hpp>
#include "admin/status.hpp"

namespace kagi::apps::admin {
namespace {

LockStatus lockd_status() {
  LockStatus s;
  s.now = std::chrono::system_clock::now();
  ClusterLocks& c = s.cluster.emplace();
  c.backend = "lockd";
  c.hosts = 2;
  c.connections = 2;
  lock::RegistryEntry holder;
  holder.host = "web1";
  holder.pid = 812;
  holder.name = "bbs/board/3";
  holder.mode = lock::Mode::kExclusive;
  holder.request_id = "1f3a";
  holder.method = "POST";
  holder.path = "/bbs/3/post";
  holder.client_address = "10.0.0.5:41234";
  holder.since = s.now - std::chrono::milliseconds(40);
  lock::RegistryEntry php = holder;
  php.host = "10.0.0.9";
  php.pid = 0;
  php.waiting = true;
  php.request_id = "bbs.php";
  php.method = php.path = "";
  php.client_address = "10.0.0.9:51812";
  c.locks = group_entries({holder, php});
  return s;
}

TEST(StatusLockd, EverySurfaceShowsTheClientAddresses) {
  const LockStatus s = lockd_status();
  const std::string json = to_json(s);
  EXPECT_NE(json.find("\"cluster\":{\"backend\":\"lockd\",\"hosts\":2,\"connections\":2"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"path\":\"/bbs/3/post\",\"since\":"), std::string::npos) << json;
  EXPECT_NE(json.find("\"long\":false,\"client_address\":\"10.0.0.5:41234\"}"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"client_address\":\"10.0.0.9:51812\"}"), std::string::npos) << json;

  const std::string text = to_text(s);
  EXPECT_NE(text.find("across hosts (kagi-lockd) — 2 host(s), 2 connection(s)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("web1/812"), std::string::npos) << text;
  EXPECT_NE(text.find("(1f3a) from 10.0.0.5:41234"), std::string::npos) << text;
  EXPECT_NE(text.find("bbs.php from 10.0.0.9:51812"), std::string::npos) << text;

  const std::string metrics = to_prometheus(s);
  EXPECT_NE(metrics.find("kagi_cluster_up 1"), std::string::npos);
  EXPECT_NE(metrics.find("kagi_cluster_locks_held{host=\"web1\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kagi_cluster_locks_waiting{host=\"10.0.0.9\"} 1"), std::string::npos)
      << metrics;

  static const view::Views views(std::string(KAGI_SOURCE_DIR) + "/templates");
  view::Dict dict;
  fill_dict(s, dict);
  const std::string html = views.render("admin/locks.html", dict);
  EXPECT_NE(html.find("Across hosts (kagi-lockd)"), std::string::npos);
  EXPECT_NE(html.find("<th>Client</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>10.0.0.5:41234</td>"), std::string::npos) << html;
}

TEST(StatusLockd, AServerThatCannotBeReadSaysWhy) {
  LockStatus s = lockd_status();
  s.cluster->error = "kagi-lockd 127.0.0.1:1006: connect: Connection refused";
  s.cluster->locks.clear();
  EXPECT_NE(to_text(s).find("across hosts (kagi-lockd): error: cannot read the lock server: "
                            "kagi-lockd 127.0.0.1:1006: connect: Connection refused"),
            std::string::npos);
  EXPECT_NE(to_prometheus(s).find("kagi_cluster_up 0"), std::string::npos);
}

}  // namespace
}  // namespace kagi::apps::admin
