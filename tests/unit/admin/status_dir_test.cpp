// The admin surfaces with the dir backend: every host's holders read from the owner records in
// the shared locks.dir, with their lease (age, time left, expired) and fencing token, in
// /admin/locks.json's "cluster", the page (with a "Break stale lock" form only for an expired
// lease) and kagi-locks' table; and break_stale_lock(), which removes only a record expired by
// more than the clock-skew margin and still under the name the page showed.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <kagi/lock/cluster_status.hpp>
#include <kagi/lock/detail/dir_lock.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/view/views.hpp>
#include "../support/temp_dir.hpp"
#include "admin/status.hpp"

namespace kagi::apps::admin {
namespace {

using namespace std::chrono_literals;

std::string render_page(const LockStatus& status) {
  static const view::Views views(std::string(KAGI_SOURCE_DIR) + "/templates");
  view::Dict dict;
  fill_dict(status, dict);
  return views.render("admin/locks.html", dict);
}

class StatusDirTest : public ::testing::Test {
 protected:
  lock::LockOptions host(const std::string& id) {
    lock::LockOptions o;
    o.backend = "dir";
    o.dir = dir_.path() + "/shared";
    o.dir_host_id = id;
    o.timeout = 2s;
    return o;
  }
  test_support::TempDir dir_;
};

TEST_F(StatusDirTest, EveryHostsHolderWithItsLeaseOnEverySurface) {
  auto web1 = lock::LockService::create(host("web1"));
  auto ctx = web1->context({"req-17", "POST", "/bbs/3/post", "192.0.2.7"});
  auto g = ctx->exclusive("bbs/board/3");
  // Read from the other host: its own registry is empty, the records show web1's lock.
  auto web2_options = host("web2");
  auto web2 = lock::LockService::create(web2_options);
  const LockStatus status = collect_status(lock::host_state_dir(web2_options), web2_options);
  ASSERT_TRUE(status.cluster.has_value());
  EXPECT_TRUE(status.locks.empty());
  EXPECT_EQ(status.cluster->backend, "dir");
  EXPECT_EQ(status.cluster->hosts, 1u);
  ASSERT_EQ(status.cluster->locks.size(), 1u);
  const lock::RegistryEntry& e = status.cluster->locks[0].holders.at(0);
  EXPECT_EQ(e.host, "web1");
  EXPECT_EQ(e.name, "bbs/board/3");
  EXPECT_EQ(e.request_id, "req-17");
  EXPECT_EQ(e.path, "/bbs/3/post");
  EXPECT_EQ(e.token, g.epoch());
  const std::string json = to_json(status);
  for (const char* field : {"\"record\":\"bbs@board@3.d/x.", "\"lease_left_ms\":",
                            "\"lease_age_ms\":", "\"expired\":false", "\"host\":\"web1\""}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
  }
  const std::string html = render_page(status);
  EXPECT_NE(html.find("Across hosts (dir)"), std::string::npos);
  EXPECT_NE(html.find("owner records in locks.dir"), std::string::npos);
  EXPECT_NE(html.find(" left (renewed "), std::string::npos) << html;
  EXPECT_EQ(html.find("Break stale lock"), std::string::npos);  // a live lease: no button
  EXPECT_NE(to_text(status).find("lease "), std::string::npos);
  // A live record cannot be broken.
  EXPECT_EQ(lock::break_stale_lock(web2_options, e.record),
            std::errc::resource_unavailable_try_again);
  EXPECT_TRUE(g.verify() == std::error_code());
}

TEST_F(StatusDirTest, OnlyARecordExpiredPastTheSkewMarginAndStillUnderItsNameIsBroken) {
  auto options = host("web2");
  std::filesystem::create_directories(options.dir);
  // A holder that stopped renewing (no heartbeat: the protocol alone, with a 1 ms lease).
  lock::dirlock::DirLocks dead({.root = options.dir + "/dirlocks", .host = "web1", .lease = 1ms});
  lock::dirlock::Hold hold;
  ASSERT_FALSE(dead.try_lock("bbs/board/9", lock::Mode::kExclusive, {"r", "POST", "/p", ""}, true,
                             hold, nullptr));
  std::this_thread::sleep_for(5ms);
  // Expired, but by less than the clock-skew margin (locks.dir_max_clock_skew_ms, 30 s here):
  // its holder's clock may run behind ours and it may still be renewing. No button, no break.
  const LockStatus early = collect_status(dir_.path() + "/state", options);
  ASSERT_EQ(early.cluster->locks.size(), 1u);
  const std::string record = early.cluster->locks[0].holders.at(0).record;
  EXPECT_NE(to_json(early).find("\"expired\":true"), std::string::npos);
  EXPECT_EQ(render_page(early).find("Break stale lock"), std::string::npos);
  EXPECT_EQ(lock::break_stale_lock(options, record), std::errc::resource_unavailable_try_again);
  // Past the margin (a short one here, so as not to wait for 30 s): broken.
  options.dir_max_clock_skew = 20ms;
  std::this_thread::sleep_for(30ms);
  const LockStatus status = collect_status(dir_.path() + "/state", options);
  ASSERT_EQ(status.cluster->locks.size(), 1u);
  const std::string html = render_page(status);
  EXPECT_NE(html.find("Break stale lock"), std::string::npos);
  EXPECT_NE(html.find("value=\"" + record + "\""), std::string::npos);
  EXPECT_EQ(lock::break_stale_lock(options, "../etc/x.d/y"), std::errc::invalid_argument);
  EXPECT_EQ(lock::break_stale_lock(options, "nothing"), std::errc::invalid_argument);
  EXPECT_FALSE(lock::break_stale_lock(options, record));
  EXPECT_EQ(lock::break_stale_lock(options, record), lock::Errc::kReleased);  // gone now
  EXPECT_EQ(dead.renew(hold), lock::Errc::kFenceLost);  // its holder is fenced
  auto service = lock::LockService::create(options);
  auto ctx = service->context({"next", "POST", "/p", ""});
  EXPECT_TRUE(ctx->try_exclusive("bbs/board/9"));
}

}  // namespace
}  // namespace kagi::apps::admin
