// With data.fsync = "always" (group commit), a BBS post is answered only once its record is
// durable, and another visitor is not shown it before then; meanwhile the board's lock is free.
// The App runs on a filesystem whose fsync the test holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <kagi/app/app.hpp>
#include <kagi/app/test_client.hpp>

#include "../store/slow_sync_fs.hpp"
#include "bbs/bbs.hpp"

namespace kagi::apps {
namespace {

using namespace std::chrono_literals;

class DurableAnswerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-bbs-durable-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    const AppModule bbs = bbs_module();
    app_ = std::make_unique<App>(
        Config::load(
            schema_for({bbs}), std::nullopt,
            {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
             "locks.dir=" + (root_ / "locks").string(), "data.dir=" + (root_ / "data").string(),
             "data.fsync=always", "log.access=false", "bbs.flood_interval_s=0"}),
        fs_);
    bbs.mount(*app_);
  }
  void TearDown() override {
    fs_.release();
    app_.reset();
    std::filesystem::remove_all(root_);
  }
  http::Response post(TestClient& who, const std::string& body) {
    return who.post_form("/bbs/general/post", {{"subject", "s"}, {"body", body}});
  }

  std::filesystem::path root_;
  store::testing::SlowSyncFs fs_;  // outlives the App
  std::unique_ptr<App> app_;
};

TEST_F(DurableAnswerTest, APostIsAnsweredAndShownOnlyOnceItIsDurable) {
  TestClient alice(*app_, "192.0.2.1"), bob(*app_, "192.0.2.2");
  ASSERT_EQ(post(alice, "the first post").status, 303);  // creates the board's log
  ASSERT_EQ(bob.get("/bbs/general/").status, 200);

  fs_.hold();
  std::atomic<int> status{0};
  alice.on_answer([&](const http::Response& r) { status = r.status; });
  std::thread poster([&] { post(alice, "waiting for its flush"); });
  ASSERT_TRUE(fs_.wait_for_held_sync());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(status.load(), 0) << "answered before the post was durable";

  // Bob's page read is not held up by the board's lock (the poster released it before its
  // flush), but it may not show the post yet: it too waits for the flush.
  std::atomic<bool> shown{false};
  bob.on_answer([&](const http::Response& page) {
    shown = page.body.find("waiting for its flush") != std::string::npos;
  });
  std::thread reader([&] { bob.get("/bbs/general/"); });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(shown.load());

  fs_.release();
  poster.join();
  reader.join();
  EXPECT_EQ(status.load(), 303);
  EXPECT_TRUE(shown.load());
}

}  // namespace
}  // namespace kagi::apps
