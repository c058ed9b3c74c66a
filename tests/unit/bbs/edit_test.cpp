// The BBS edit flow through the real pipeline (TestClient: two browsers with their own
// cookies): who sees the editor, who is told "being edited by ...", what a save needs (the
// post's offline lock, still held, and the version loaded), the session cookie and its new id
// after the password is proven, renewals, cancel, run-out locks, and limits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <kagi/app/app.hpp>
#include <kagi/app/test_client.hpp>
#include <kagi/offline/lock_manager.hpp>

#include "bbs/bbs.hpp"

namespace kagi::apps {
namespace {

using namespace std::chrono_literals;

bool has(const http::Response& r, std::string_view text) {
  return r.body.find(text) != std::string::npos;
}

class EditTest : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-bbs-edit-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    const AppModule bbs = bbs_module();
    std::vector<std::string> set = {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
                                    "locks.dir=" + (root_ / "locks").string(),
                                    "data.dir=" + (root_ / "data").string(),
                                    "data.fsync=never",
                                    "log.access=false",
                                    "bbs.flood_interval_s=0"};
    set.insert(set.end(), extra.begin(), extra.end());
    app_ = std::make_unique<App>(Config::load(schema_for({bbs}), std::nullopt, set));
    bbs.mount(*app_);
    alice_ = std::make_unique<TestClient>(*app_, "192.0.2.1");
    bob_ = std::make_unique<TestClient>(*app_, "192.0.2.2");
    // Post 1 has a password; post 2 has none.
    ASSERT_EQ(alice_
                  ->post_form("/bbs/general/post", {{"name", "Ann"},
                                                    {"subject", "first"},
                                                    {"body", "the original text"},
                                                    {"password", "secret"}})
                  .status,
              303);
    ASSERT_EQ(
        alice_->post_form("/bbs/general/post", {{"subject", "s"}, {"body", "no password"}}).status,
        303);
  }
  void TearDown() override {
    alice_.reset();
    bob_.reset();
    app_.reset();
    std::filesystem::remove_all(root_);
  }
  http::Response open(TestClient& who, int id, const std::string& password,
                      const std::string& name) {
    return who.post_form("/bbs/general/edit/" + std::to_string(id) + "/open",
                         {{"password", password}, {"name", name}});
  }
  http::Response save(TestClient& who, int id, const std::string& body,
                      const std::string& version = "") {
    std::vector<std::pair<std::string, std::string>> fields = {{"subject", "edited subject"},
                                                               {"body", body}};
    if (!version.empty()) fields.emplace_back("version", version);
    return who.post_form("/bbs/general/edit/" + std::to_string(id), fields);
  }
  std::string posts_json() { return alice_->get("/bbs/general/posts.json").body; }

  std::filesystem::path root_;
  std::unique_ptr<App> app_;
  std::unique_ptr<TestClient> alice_, bob_;
};

TEST_F(EditTest, UnknownPostsAndBoardsAre404) {
  start();
  EXPECT_EQ(alice_->get("/bbs/general/edit/99").status, 404);
  EXPECT_EQ(alice_->get("/bbs/general/edit/abc").status, 404);
  EXPECT_EQ(alice_->get("/bbs/general/edit/0").status, 404);
  EXPECT_EQ(alice_->get("/bbs/nowhere/edit/1").status, 404);
  EXPECT_EQ(open(*alice_, 99, "secret", "A").status, 404);
  EXPECT_EQ(save(*alice_, 99, "x").status, 404);
}

TEST_F(EditTest, TheEditorIsOpenedByThePostsPasswordOnly) {
  start();
  http::Response page = alice_->get("/bbs/general/edit/1");
  EXPECT_EQ(page.status, 200);
  EXPECT_TRUE(has(page, "id=\"open\"")) << page.body;  // the password form
  EXPECT_TRUE(has(page, "the original text"));
  EXPECT_EQ(alice_->cookie("kagi_session"), "");  // looking makes no session

  EXPECT_EQ(open(*alice_, 1, "wrong", "Alice").status, 403);
  EXPECT_EQ(alice_->cookie("kagi_session"), "");
  EXPECT_EQ(open(*alice_, 2, "", "Alice").status, 403);  // made without a password
  EXPECT_TRUE(has(alice_->get("/bbs/general/edit/2"), "without a password"));

  // Without the CSRF token the pipeline refuses it.
  http::Request forged;
  forged.method = "POST";
  forged.target = "/bbs/general/edit/1/open";
  forged.headers.add("Content-Type", "application/x-www-form-urlencoded");
  forged.body = "password=secret";
  EXPECT_EQ(bob_->send(forged).status, 403);

  http::Response opened = open(*alice_, 1, "secret", "Alice");
  ASSERT_EQ(opened.status, 303);
  EXPECT_EQ(opened.headers.get("Location").value_or(""), "/bbs/general/edit/1");
  const auto cookie = std::find_if(opened.cookies.begin(), opened.cookies.end(),
                                   [](const http::Cookie& c) { return c.name == "kagi_session"; });
  ASSERT_NE(cookie, opened.cookies.end());
  EXPECT_EQ(cookie->value.size(), 64u);
  EXPECT_EQ(http::to_set_cookie(*cookie).find("HttpOnly") != std::string::npos, true);
  EXPECT_NE(http::to_set_cookie(*cookie).find("SameSite=Lax"), std::string::npos);
  EXPECT_EQ(http::to_set_cookie(*cookie).find("Secure"), std::string::npos);  // plain http

  page = alice_->get("/bbs/general/edit/1");
  EXPECT_EQ(page.status, 200);
  EXPECT_TRUE(has(page, "id=\"editor\"")) << page.body;
  EXPECT_TRUE(has(page, "name=\"version\" value=\"1\""));
}

TEST_F(EditTest, AnotherSessionIsToldWhoEditsAndUntilWhenBeforeTyping) {
  start();
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  http::Response page = bob_->get("/bbs/general/edit/1");
  EXPECT_EQ(page.status, 200);
  EXPECT_TRUE(has(page, "Being edited by <bdi>Alice</bdi> since ")) << page.body;
  EXPECT_TRUE(has(page, "free at "));
  EXPECT_TRUE(has(page, "the original text"));  // read-only
  EXPECT_FALSE(has(page, "id=\"editor\""));
  EXPECT_FALSE(has(page, "id=\"open\""));
  // Even with the right password: 423, told at once.
  http::Response refused = open(*bob_, 1, "secret", "Bob");
  EXPECT_EQ(refused.status, 423);
  EXPECT_TRUE(has(refused, "Being edited by <bdi>Alice</bdi>")) << refused.body;
  // Bob's save without the lock: 409, nothing saved.
  http::Response saved = save(*bob_, 1, "bob's text");
  EXPECT_EQ(saved.status, 409);
  EXPECT_TRUE(has(saved, "Nothing was saved"));
  EXPECT_TRUE(has(saved, "bob&#39;s text")) << "the typed text is shown again";
  EXPECT_EQ(posts_json().find("bob's text"), std::string::npos);
}

TEST_F(EditTest, ASaveWritesThePostReleasesTheLockAndShowsTheEdit) {
  start();
  EXPECT_NE(posts_json().find("\"edited_at\":null"), std::string::npos) << posts_json();
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  http::Response saved = save(*alice_, 1, "the new text", "1");
  ASSERT_EQ(saved.status, 303);
  EXPECT_EQ(saved.headers.get("Location").value_or(""), "/bbs/general/#p1");
  const std::string json = posts_json();
  EXPECT_NE(json.find("\"body\":\"the new text\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"subject\":\"edited subject\""), std::string::npos);
  EXPECT_NE(json.find("\"edited_at\":\"20"), std::string::npos) << json;  // ISO 8601 UTC
  EXPECT_NE(json.find("Z\""), std::string::npos);
  EXPECT_TRUE(has(alice_->get("/bbs/general/"), " · edited "));
  // Released: Bob may edit now.
  EXPECT_EQ(open(*bob_, 1, "secret", "Bob").status, 303);
  EXPECT_TRUE(has(bob_->get("/bbs/general/edit/1"), "name=\"version\" value=\"2\""));
}

TEST_F(EditTest, ASaveOverAnotherVersionIsRefused) {
  start();
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  ASSERT_EQ(save(*alice_, 1, "version two", "1").status, 303);
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  http::Response stale = save(*alice_, 1, "from an old page", "1");
  EXPECT_EQ(stale.status, 409);
  EXPECT_TRUE(has(stale, "was changed since your editor loaded it"));
  EXPECT_EQ(posts_json().find("from an old page"), std::string::npos);
}

TEST_F(EditTest, OpeningProvesAPrivilegeSoTheSessionGetsANewId) {
  start({"session.max_offline_locks=4"});
  ASSERT_EQ(alice_->post_form("/bbs/general/post", {{"body", "third"}, {"password", "p3"}}).status,
            303);
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  const std::string first_id = alice_->cookie("kagi_session");
  ASSERT_EQ(open(*alice_, 3, "p3", "").status, 303);
  const std::string second_id = alice_->cookie("kagi_session");
  EXPECT_NE(second_id, first_id);
  // The same session still: it holds both locks, and kept its name.
  EXPECT_TRUE(has(alice_->get("/bbs/general/edit/1"), "id=\"editor\""));
  EXPECT_TRUE(has(alice_->get("/bbs/general/edit/3"), "id=\"editor\""));
  EXPECT_TRUE(has(bob_->get("/bbs/general/edit/3"), "Being edited by <bdi>Alice</bdi>"));
  // A browser holding the old id (planted, or stolen before the login) has no session.
  TestClient planted(*app_, "192.0.2.9");
  planted.get("/");
  http::Request r;
  r.method = "GET";
  r.target = "/bbs/general/edit/1";
  r.headers.add("Cookie", "kagi_session=" + first_id);
  EXPECT_TRUE(has(planted.send(r), "Being edited by"));
}

TEST_F(EditTest, RenewKeepsTheLockAndCancelGivesItBack) {
  start();
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  http::Response renewed = alice_->post_form("/bbs/general/edit/1/renew", {});
  EXPECT_EQ(renewed.status, 200);
  EXPECT_NE(renewed.body.find("\"held\":true"), std::string::npos) << renewed.body;
  EXPECT_NE(renewed.body.find("\"left_s\":"), std::string::npos);
  EXPECT_EQ(bob_->post_form("/bbs/general/edit/1/renew", {}).status, 409);  // not Bob's
  EXPECT_EQ(alice_->post_form("/bbs/general/edit/1/cancel", {}).status, 303);
  renewed = alice_->post_form("/bbs/general/edit/1/renew", {});
  EXPECT_EQ(renewed.status, 409);
  EXPECT_NE(renewed.body.find("\"held\":false"), std::string::npos);
  EXPECT_EQ(open(*bob_, 1, "secret", "Bob").status, 303);
}

TEST_F(EditTest, AnEditorThatWalksAwayLosesThePostAfterTheTtl) {
  start({"bbs.edit_ttl_s=1"});
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  EXPECT_EQ(open(*bob_, 1, "secret", "Bob").status, 423);
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(save(*alice_, 1, "too late").status, 409);
  EXPECT_EQ(posts_json().find("too late"), std::string::npos);
  EXPECT_EQ(open(*bob_, 1, "secret", "Bob").status, 303);
}

TEST_F(EditTest, AnOwnerIsToldWhenAnAdminReleasedItsLock) {
  start();
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  auto held = app_->offline_locks().inspect("bbs/post/general/1").value();
  ASSERT_EQ(held.size(), 1u);
  ASSERT_TRUE(app_->offline_locks().force_release("bbs/post/general/1", held[0].owner).value());
  http::Response page = alice_->get("/bbs/general/edit/1");
  EXPECT_TRUE(has(page, "was released by an administrator")) << page.body;
  EXPECT_TRUE(has(page, "id=\"open\""));
  EXPECT_FALSE(has(alice_->get("/bbs/general/edit/1"), "administrator"));  // told once
}

TEST_F(EditTest, ASessionHoldsAtMostItsLimitOfOpenEditors) {
  start({"session.max_offline_locks=1"});
  ASSERT_EQ(alice_->post_form("/bbs/general/post", {{"body", "third"}, {"password", "p3"}}).status,
            303);
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  EXPECT_EQ(open(*alice_, 3, "p3", "Alice").status, 429);
}

TEST_F(EditTest, BadInputIsAClearError) {
  start();
  EXPECT_EQ(alice_
                ->post_form("/bbs/general/edit/1/open",
                            {{"password", std::string("se\0cret", 7)}, {"name", "A"}})
                .status,
            400);
  EXPECT_EQ(open(*alice_, 1, "secret", std::string(200, 'n')).status, 400);
  ASSERT_EQ(open(*alice_, 1, "secret", "Alice").status, 303);
  EXPECT_EQ(save(*alice_, 1, "\xff\xfe").status, 400);
  http::Response empty = save(*alice_, 1, "   ");
  EXPECT_EQ(empty.status, 400);
  EXPECT_TRUE(has(empty, "Please write a message"));
  EXPECT_TRUE(has(empty, "id=\"editor\""));  // still editing
  EXPECT_EQ(save(*alice_, 1, "<script>alert(1)</script>").status, 303);
  EXPECT_TRUE(has(alice_->get("/bbs/general/"), "&lt;script&gt;alert(1)&lt;/script&gt;"));
}

TEST_F(EditTest, OverHttpsTheSessionCookieIsSecure) {
  start({"server.behind_https=true"});
  // Over https the CSRF cookie is __Host-kagi_csrf; the client keeps and sends it back.
  http::Response opened = open(*alice_, 1, "secret", "Alice");
  ASSERT_EQ(opened.status, 303) << opened.body;
  bool secure = false;
  for (const auto& c : opened.cookies) {
    if (c.name == "kagi_session")
      secure = http::to_set_cookie(c).find("Secure") != std::string::npos;
  }
  EXPECT_TRUE(secure);
}

}  // namespace
}  // namespace kagi::apps
