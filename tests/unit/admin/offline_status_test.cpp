// Offline locks on the admin surfaces, through the real pipeline: a session opens a post's
// editor (BBS), and /admin/locks, /admin/locks.json, /metrics and kagi-locks' text show the
// lock with its owner; the Release button (CSRF, login) frees it and the owner's save is then
// refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <kagi/app/app.hpp>
#include <kagi/app/test_client.hpp>
#include <kagi/http/form.hpp>
#include <kagi/util/password.hpp>
#include "admin/admin.hpp"
#include "admin/status.hpp"
#include "bbs/bbs.hpp"

namespace kagi::apps {
namespace {

constexpr const char* kAuth = "Basic YWRtaW46czNjcmV0";  // admin:s3cret

class OfflineAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-admin-offline-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    std::ofstream(root_ / "admin.htpasswd")
        << "admin:" << util::hash_password("s3cret").value() << "\n";
    const AppModule bbs = bbs_module(), admin = admin_module();
    app_ = std::make_unique<App>(Config::load(
        schema_for({bbs, admin}), std::nullopt,
        {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
         "locks.dir=" + (root_ / "locks").string(), "data.dir=" + (root_ / "data").string(),
         "data.fsync=never", "log.access=false", "bbs.flood_interval_s=0",
         "admin.htpasswd=" + (root_ / "admin.htpasswd").string(), "admin.allow=192.0.2.3"}));
    bbs.mount(*app_);
    admin.mount(*app_);
    alice_ = std::make_unique<TestClient>(*app_, "192.0.2.1");
    admin_ = std::make_unique<TestClient>(*app_, "192.0.2.3");
    ASSERT_EQ(alice_->post_form("/bbs/general/post", {{"body", "text"}, {"password", "pw"}}).status,
              303);
    ASSERT_EQ(alice_->post_form("/bbs/general/edit/1/open", {{"password", "pw"}, {"name", "Alice"}})
                  .status,
              303);
    TestClient bob(*app_, "192.0.2.2");
    ASSERT_EQ(
        bob.post_form("/bbs/general/edit/1/open", {{"password", "pw"}, {"name", "Bob"}}).status,
        423);
  }
  void TearDown() override {
    alice_.reset();
    admin_.reset();
    app_.reset();
    std::filesystem::remove_all(root_);
  }
  http::Response admin_get(const std::string& target) {
    http::Request r;
    r.method = "GET";
    r.target = target;
    r.headers.add("Authorization", kAuth);
    return admin_->send(r);
  }
  http::Response release(const std::string& key, const std::string& owner, bool csrf = true,
                         bool auth = true) {
    if (admin_->csrf_token().empty()) admin_->get("/");
    http::Request r;
    r.method = "POST";
    r.target = "/admin/offline/release";
    r.headers.add("Content-Type", "application/x-www-form-urlencoded");
    if (auth) r.headers.add("Authorization", kAuth);
    r.body = "key=" + http::percent_encode(key) + "&owner=" + http::percent_encode(owner);
    if (csrf) r.body += "&_csrf=" + admin_->csrf_token();
    return admin_->send(r);
  }
  std::string owner() {
    auto held = app_->offline_locks().inspect("bbs/post/general/1").value();
    return held.empty() ? "" : held[0].owner;
  }

  std::filesystem::path root_;
  std::unique_ptr<App> app_;
  std::unique_ptr<TestClient> alice_, admin_;
};

TEST_F(OfflineAdminTest, EverySurfaceShowsTheLockAndItsOwner) {
  const http::Response json = admin_get("/admin/locks.json");
  ASSERT_EQ(json.status, 200);
  EXPECT_NE(json.body.find("\"offline\":{\"locks\":[{\"key\":\"bbs/post/general/1\",\"kind\":"
                           "\"exclusive-write\",\"owner\":\"" +
                           owner() + "\",\"owner_name\":\"Alice\",\"session_age_ms\":"),
            std::string::npos)
      << json.body;
  EXPECT_NE(json.body.find("\"counters\":{\"grants\":1,\"denials\":1,\"expiries\":0,"
                           "\"takeovers\":0,\"releases\":0,\"force_releases\":0}"),
            std::string::npos)
      << json.body;

  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("\nkagi_offline_up 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nkagi_offline_locks_held 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nkagi_offline_grants_total 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("\nkagi_offline_denials_total 1\n"), std::string::npos);

  const std::string html = admin_get("/admin/locks").body;
  EXPECT_NE(html.find("<h2>Offline locks</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"name\">bbs/post/general/1</td><td>exclusive-write</td><td>"
                      "<bdi>Alice</bdi></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("action=\"/admin/offline/release\""), std::string::npos);
  EXPECT_NE(html.find("name=\"owner\" value=\"" + owner() + "\""), std::string::npos);

  admin::LockStatus status;
  status.now = std::chrono::system_clock::now();
  status.offline = admin::collect_offline(app_->offline_locks(), app_->sessions());
  const std::string text = admin::to_text(status);
  EXPECT_NE(text.find("offline locks"), std::string::npos) << text;
  EXPECT_NE(text.find("bbs/post/general/1"), std::string::npos) << text;
  EXPECT_NE(text.find("Alice"), std::string::npos) << text;
}

TEST_F(OfflineAdminTest, ReleaseNeedsTheLoginAndTheTokenAndTellsTheOwner) {
  const std::string holder = owner();
  ASSERT_FALSE(holder.empty());
  EXPECT_EQ(release("bbs/post/general/1", holder, /*csrf=*/false).status, 403);
  EXPECT_EQ(release("bbs/post/general/1", holder, true, /*auth=*/false).status, 401);
  EXPECT_EQ(release("../etc", holder).status, 400);
  EXPECT_EQ(release("bbs/post/general/1", "").status, 400);
  EXPECT_EQ(owner(), holder);  // none of those released it

  const http::Response done = release("bbs/post/general/1", holder);
  EXPECT_EQ(done.status, 303);
  EXPECT_EQ(done.headers.get("Location").value_or(""), "/admin/locks");
  EXPECT_EQ(owner(), "");
  EXPECT_EQ(release("bbs/post/general/1", holder).status, 409);  // not held any more

  // Alice's save is refused, and she is told why.
  EXPECT_EQ(
      alice_->post_form("/bbs/general/edit/1", {{"subject", "s"}, {"body", "too late"}}).status,
      409);
  EXPECT_NE(alice_->get("/bbs/general/edit/1").body.find("released by an administrator"),
            std::string::npos);
  EXPECT_NE(admin_get("/metrics").body.find("\nkagi_offline_force_releases_total 1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace kagi::apps
