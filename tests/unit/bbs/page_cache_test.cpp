// Board pages are rendered once per state of the board and served from the page cache after
// that (bbs.page_cache): every reader must still see every post, edit, delete and compaction
// at once, by whichever process made it, with its own CSRF token in the forms, and byte for
// byte the page a process that renders every time shows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <kagi/app/app.hpp>
#include <kagi/app/test_client.hpp>

#include "bbs/bbs.hpp"

namespace kagi::apps {
namespace {

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
    text.replace(at, from.size(), to);
  }
  return text;
}

class BoardPageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-bbs-page-cache-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    // Two apps over one data.dir and locks.dir, as two processes of one site: the first keeps
    // rendered pages, the second renders every time.
    cached_ = make_app("256");
    fresh_ = make_app("0");
    alice_ = std::make_unique<TestClient>(*cached_, "192.0.2.1");
    bob_ = std::make_unique<TestClient>(*cached_, "192.0.2.2");
    carol_ = std::make_unique<TestClient>(*fresh_, "192.0.2.3");
  }
  void TearDown() override {
    alice_.reset();
    bob_.reset();
    carol_.reset();
    cached_.reset();
    fresh_.reset();
    std::filesystem::remove_all(root_);
  }
  std::unique_ptr<App> make_app(const std::string& page_cache) {
    const AppModule bbs = bbs_module();
    auto app = std::make_unique<App>(Config::load(
        schema_for({bbs}), std::nullopt,
        {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
         "locks.dir=" + (root_ / "locks").string(), "data.dir=" + (root_ / "data").string(),
         "security.secret_file=" + (root_ / "secret.key").string(), "data.fsync=never",
         "log.access=false", "bbs.flood_interval_s=0", "bbs.keep=3", "bbs.page_size=2",
         "bbs.page_cache=" + page_cache}));
    bbs.mount(*app);
    return app;
  }
  // Page `page` of the board as `who` sees it, with its token swapped for a fixed text; and
  // checks that it carries `who`'s token and nobody else's.
  std::string page(TestClient& who, int page = 1) {
    http::Response r = who.get("/bbs/general/?page=" + std::to_string(page));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(who.csrf_token().empty());
    EXPECT_NE(r.body.find("value=\"" + who.csrf_token() + "\""), std::string::npos);
    for (TestClient* other : {alice_.get(), bob_.get(), carol_.get()}) {
      if (other != &who && !other->csrf_token().empty()) {
        EXPECT_EQ(r.body.find(other->csrf_token()), std::string::npos) << "another's token";
      }
    }
    return replaced(r.body, who.csrf_token(), "TOKEN");
  }
  // Every reader, on both apps, sees the same page; returns it.
  std::string everyone_sees(int number = 1) {
    const std::string a = page(*alice_, number);
    EXPECT_EQ(page(*bob_, number), a);
    EXPECT_EQ(page(*alice_, number), a);
    EXPECT_EQ(page(*carol_, number), a) << "the rendering process shows another page";
    return a;
  }
  void post(TestClient& who, const std::string& body, const std::string& password = "") {
    ASSERT_EQ(who.post_form("/bbs/general/post", {{"body", body}, {"password", password}}).status,
              303);
  }

  std::filesystem::path root_;
  std::unique_ptr<App> cached_, fresh_;
  std::unique_ptr<TestClient> alice_, bob_, carol_;
};

TEST_F(BoardPageCacheTest, EveryChangeByEitherProcessIsSeenAtOnce) {
  for (TestClient* c : {alice_.get(), bob_.get(), carol_.get()}) c->get("/");
  EXPECT_NE(everyone_sees().find("No posts yet"), std::string::npos);

  post(*alice_, "first words", "pw");
  EXPECT_NE(everyone_sees().find("first words"), std::string::npos);

  post(*carol_, "from the other process");  // the caching app did not make this change
  std::string shown = everyone_sees();
  EXPECT_NE(shown.find("from the other process"), std::string::npos);
  EXPECT_NE(shown.find("first words"), std::string::npos);
  EXPECT_NE(shown.find("2 posts"), std::string::npos);

  post(*bob_, "third <b>bold</b>");
  EXPECT_NE(everyone_sees(2).find("first words"), std::string::npos) << "page 2 holds the oldest";
  shown = everyone_sees(1);
  EXPECT_NE(shown.find("third &lt;b&gt;bold&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(shown.find("first words"), std::string::npos);

  // A delete rewrites the log: the kept pages of the old state must not be served.
  ASSERT_EQ(alice_->post_form("/bbs/general/delete", {{"id", "1"}, {"password", "pw"}}).status,
            303);
  EXPECT_EQ(everyone_sees(2).find("first words"), std::string::npos);
  EXPECT_NE(everyone_sees(1).find("2 posts"), std::string::npos);

  // Compaction (bbs.keep=3: the log is rewritten beyond 12 records), by the rendering process.
  for (int i = 0; i < 12; ++i) post(*carol_, "more " + std::to_string(i));
  shown = everyone_sees();
  EXPECT_NE(shown.find("more 11"), std::string::npos);
  EXPECT_NE(shown.find("3 posts"), std::string::npos);
}

}  // namespace
}  // namespace kagi::apps
