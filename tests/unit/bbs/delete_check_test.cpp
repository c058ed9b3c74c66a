// Checking a delete password costs tens of ms of CPU. A process checks one at a time: a
// flood of guesses must not occupy the worker threads a reader needs, so a guess that arrives
// while another is checked is answered 429 + Retry-After at once, without hashing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <kagi/app/app.hpp>
#include <kagi/util/password.hpp>

#include "bbs/bbs.hpp"

namespace kagi::apps {
namespace {

class Sink : public Responder {
 public:
  void send(http::Response response) override { response_ = std::move(response); }
  bool client_gone() const override { return false; }
  http::Response response_;
};

class DeleteCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-bbs-delete-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    const AppModule bbs = bbs_module();
    app_ = std::make_unique<App>(Config::load(
        schema_for({bbs}), std::nullopt,
        {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
         "locks.dir=" + (root_ / "locks").string(), "data.dir=" + (root_ / "data").string(),
         "data.fsync=never", "log.access=false", "bbs.flood_interval_s=0",
         "bbs.delete_tries_per_client=1000", "bbs.delete_tries_per_post=1000"}));
    bbs.mount(*app_);
    for (const auto& cookie : run(request("GET", "/bbs/general/", "")).cookies) {
      if (cookie.name == "kagi_csrf") token_ = cookie.value;
    }
    ASSERT_FALSE(token_.empty());
  }
  void TearDown() override {
    app_.reset();
    std::filesystem::remove_all(root_);
  }
  http::Request request(std::string method, std::string target, std::string body) const {
    http::Request r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.client_address = "192.0.2.1";
    if (!body.empty()) {
      r.headers.add("Content-Type", "application/x-www-form-urlencoded");
      r.headers.add("Cookie", "kagi_csrf=" + token_);
      r.body = "_csrf=" + token_ + "&" + body;
    }
    return r;
  }
  http::Response run(http::Request req) {
    auto out = std::make_shared<Sink>();
    app_->handle(std::move(req), out);
    return out->response_;
  }

  std::filesystem::path root_;
  std::unique_ptr<App> app_;
  std::string token_;
};

TEST_F(DeleteCheckTest, GuessesArrivingTogetherAreCheckedOneAtATime) {
  ASSERT_EQ(run(request("POST", "/bbs/general/post", "name=ann&body=hello&password=right")).status,
            303);
  constexpr int kGuesses = 4;
  std::barrier start(kGuesses);
  std::vector<int> statuses(kGuesses);
  std::vector<std::string> bodies(kGuesses);
  const uint64_t hashed_before = util::password_verifications();
  std::vector<std::thread> threads;
  for (int i = 0; i < kGuesses; ++i) {
    threads.emplace_back([&, i] {
      http::Request req = request("POST", "/bbs/general/delete", "id=1&password=wrong");
      start.arrive_and_wait();
      http::Response r = run(std::move(req));
      statuses[i] = r.status;
      bodies[i] = r.body;
    });
  }
  for (auto& t : threads) t.join();
  int checked = 0, busy = 0;
  for (int i = 0; i < kGuesses; ++i) {
    if (statuses[i] == 403) ++checked;
    if (statuses[i] == 429 && bodies[i].find("being checked") != std::string::npos) ++busy;
  }
  EXPECT_EQ(checked + busy, kGuesses) << "every guess is either checked or told to wait";
  EXPECT_GE(busy, 1) << "four guesses released together were all hashed at once";
  EXPECT_EQ(util::password_verifications() - hashed_before, static_cast<uint64_t>(checked));
  // Alone, the right password still deletes.
  EXPECT_EQ(run(request("POST", "/bbs/general/delete", "id=1&password=right")).status, 303);
}

}  // namespace
}  // namespace kagi::apps
