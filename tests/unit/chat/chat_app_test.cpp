// The chat's routes in one process, through the real pipeline (App::handle), with no front
// end: the limits an open chat needs (flood control on say, caps on parked polls, presence
// only with the CSRF proof, bidi controls out of names), each checked on its HTTP answer.
#include "chat/chat.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <kagi/app/app.hpp>

#include "../store/slow_sync_fs.hpp"

namespace kagi::apps {
namespace {

// Captures what the pipeline sends; send() may come later, from another thread (a parked
// poll), so the answer is read through a future.
class Capture : public Responder {
 public:
  void send(http::Response response) override { promise_.set_value(std::move(response)); }
  bool client_gone() const override { return gone_.load(); }
  bool ready() const {
    return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  bool wait_for(std::chrono::seconds bound) const {
    return future_.wait_for(bound) == std::future_status::ready;
  }
  http::Response get() { return future_.get(); }
  void vanish() { gone_ = true; }

 private:
  std::promise<http::Response> promise_;
  std::shared_future<http::Response> future_ = promise_.get_future().share();
  std::atomic<bool> gone_{false};
};

class ChatAppTest : public ::testing::Test {
 protected:
  void start(std::vector<std::string> sets) {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-chat-app-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    sets.insert(sets.end(),
                {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
                 "locks.dir=" + (root_ / "locks").string(), "data.dir=" + (root_ / "data").string(),
                 "log.access=false", "chat.rooms=lobby"});
    if (std::find(sets.begin(), sets.end(), "data.fsync=always") == sets.end()) {
      sets.push_back("data.fsync=never");
    }
    const AppModule chat = chat_module();
    app_ = std::make_unique<App>(Config::load(schema_for({chat}), std::nullopt, sets), fs_);
    chat.mount(*app_);
    // A token this app signed, as a browser gets it: from the cookie of the room's page.
    for (const auto& cookie : run(get("/chat/lobby/")).cookies) {
      if (cookie.name == "kagi_csrf") token_ = cookie.value;
    }
    ASSERT_FALSE(token_.empty()) << "the first answer set no CSRF cookie";
  }
  void TearDown() override {
    if (app_) app_->shutdown();  // answers every parked poll
    app_.reset();
    std::filesystem::remove_all(root_);
  }

  // Runs `req` from `client`; the Capture answers now or, for a parked poll, later.
  std::shared_ptr<Capture> send(http::Request req, std::string client = "192.0.2.1") {
    auto out = std::make_shared<Capture>();
    req.client_address = std::move(client);
    app_->handle(std::move(req), out);
    return out;
  }
  http::Response run(http::Request req, std::string client = "192.0.2.1") {
    auto out = send(std::move(req), std::move(client));
    EXPECT_TRUE(out->ready()) << "no answer sent at once";
    return out->get();
  }

  http::Request get(std::string target, bool with_token = false) const {
    http::Request r;
    r.method = "GET";
    r.target = std::move(target);
    if (with_token) {
      r.headers.add("Cookie", "kagi_csrf=" + token_);
      r.headers.add("X-CSRF-Token", token_);
    }
    return r;
  }
  http::Request say(std::string json) const {
    http::Request r;
    r.method = "POST";
    r.target = "/chat/lobby/say";
    r.headers.add("Content-Type", "application/json");
    r.headers.add("Cookie", "kagi_csrf=" + token_);
    r.headers.add("X-CSRF-Token", token_);
    r.body = std::move(json);
    return r;
  }
  std::string who() { return run(get("/chat/lobby/who")).body; }
  int64_t last_id() {
    auto r = run(get("/chat/lobby/messages?since=0&wait=0"));
    auto at = r.body.rfind("\"last\":");
    return std::stoll(r.body.substr(at + 7));
  }

  // With `settings`, holds the flushes of files whose path ends with `held` (the commit of
  // the flood bucket beside them goes through): neither the say nor a parked poll may be
  // answered until they complete.
  void neither_is_told_before_durable(std::vector<std::string> settings, const std::string& held) {
    start(std::move(settings));
    ASSERT_EQ(run(say(R"({"name":"ann","text":"first"})")).status, 200);  // creates the log
    const int64_t last = last_id();
    auto poll = send(get("/chat/lobby/messages?since=" + std::to_string(last) + "&wait=20"));
    ASSERT_FALSE(poll->ready()) << "the poll should have parked";

    fs_.hold(held);
    auto said = send(say(R"({"name":"ann","text":"held back"})"));
    ASSERT_TRUE(fs_.wait_for_held_sync());
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_FALSE(said->ready()) << "the sayer was answered before its message was durable";
    EXPECT_FALSE(poll->ready()) << "a waiter was shown a message that was not durable";

    fs_.release();
    ASSERT_TRUE(said->wait_for(std::chrono::seconds(5)));
    EXPECT_EQ(said->get().status, 200);
    ASSERT_TRUE(poll->wait_for(std::chrono::seconds(5)));
    EXPECT_NE(poll->get().body.find("held back"), std::string::npos);
  }

  std::filesystem::path root_;
  store::testing::SlowSyncFs fs_;  // the App's data goes through it; outlives the App
  std::unique_ptr<App> app_;
  std::string token_;  // the client's signed CSRF token (set by start())
};

// --- durable before told (data.fsync = "always", group commit) --------------------------------

TEST_F(ChatAppTest, NeitherTheSayerNorAWaiterIsToldBeforeTheMessageIsDurable) {
  // The round writes the message to the process's journal and flushes that.
  neither_is_told_before_durable({"data.fsync=always"}, "/.kagi-journal/0");
}

TEST_F(ChatAppTest, WithoutTheJournalNeitherIsToldBeforeTheRoomLogIsDurable) {
  neither_is_told_before_durable({"data.fsync=always", "data.journal=false"}, ".log");
}

// --- presence needs the CSRF proof ---------------------------------------------------------

TEST_F(ChatAppTest, ABareGetWithANameMarksNobodyPresent) {
  start({});
  // What an <img src> on another site can make a visitor's browser send: cookie, no header.
  http::Request forged = get("/chat/lobby/messages?since=0&wait=0&name=ghost");
  forged.headers.add("Cookie", "kagi_csrf=" + token_);
  EXPECT_EQ(run(std::move(forged)).status, 200);  // still answered
  EXPECT_EQ(run(get("/chat/lobby/messages?since=0&wait=0&name=nocookie")).status, 200);
  EXPECT_EQ(who().find("ghost"), std::string::npos) << who();
  EXPECT_EQ(who().find("nocookie"), std::string::npos) << who();
  // A wrong token is no proof either.
  http::Request wrong = get("/chat/lobby/messages?since=0&wait=0&name=wrong");
  wrong.headers.add("Cookie", "kagi_csrf=" + token_);
  wrong.headers.add("X-CSRF-Token", "ffffffffffffffffffffffffffffffff");
  EXPECT_EQ(run(std::move(wrong)).status, 200);
  EXPECT_EQ(who().find("wrong"), std::string::npos) << who();
  // The page's script sends the token: that poll counts.
  EXPECT_EQ(run(get("/chat/lobby/messages?since=0&wait=0&name=ann", true)).status, 200);
  EXPECT_NE(who().find("\"ann\""), std::string::npos) << who();
}

// --- flood control on say ------------------------------------------------------------------

TEST_F(ChatAppTest, SayBeyondTheBurstIs429WithRetryAfterAndOthersStillTalk) {
  start({"chat.say_per_minute=6", "chat.say_burst=3"});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(run(say(R"({"name":"flood","text":"m)" + std::to_string(i) + "\"}")).status, 200);
  }
  const int64_t last = last_id();
  auto r = run(say(R"({"name":"flood","text":"one too many"})"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers.get("Retry-After").value_or(""), "10");  // one token per 10 s
  EXPECT_EQ(r.headers.get("Content-Type").value_or("").substr(0, 16), "application/json");
  EXPECT_NE(r.body.find("\"error\":\"You are sending messages too fast"), std::string::npos)
      << r.body;
  EXPECT_EQ(last_id(), last);  // not stored
  // Another address has its own bucket.
  EXPECT_EQ(run(say(R"({"name":"calm","text":"hello"})"), "192.0.2.2").status, 200);
  // A browser's form without script gets the error page, with the same status and header.
  http::Request form;
  form.method = "POST";
  form.target = "/chat/lobby/say";
  form.headers.add("Content-Type", "application/x-www-form-urlencoded");
  form.headers.add("Accept", "text/html");
  form.headers.add("Cookie", "kagi_csrf=" + token_);
  form.body = "name=flood&text=again&_csrf=" + token_;
  auto page = run(std::move(form));
  EXPECT_EQ(page.status, 429);
  EXPECT_TRUE(page.headers.get("Retry-After").has_value());
  EXPECT_EQ(page.headers.get("Content-Type").value_or("").substr(0, 9), "text/html");
}

TEST_F(ChatAppTest, SayPerMinuteZeroTurnsTheLimitOff) {
  start({"chat.say_per_minute=0", "chat.say_burst=1"});
  for (int i = 0; i < 30; ++i) ASSERT_EQ(run(say(R"({"text":"x"})")).status, 200) << i;
}

// --- caps on parked polls ------------------------------------------------------------------

TEST_F(ChatAppTest, PollsBeyondTheCapsAre429WithRetryAfter) {
  start({"chat.max_waiters=5", "chat.max_waiters_per_client=3"});
  const std::string poll = "/chat/lobby/messages?since=" + std::to_string(last_id()) + "&wait=30";
  std::vector<std::shared_ptr<Capture>> parked;
  for (int i = 0; i < 3; ++i) parked.push_back(send(get(poll), "192.0.2.1"));
  for (auto& p : parked) EXPECT_FALSE(p->ready()) << "a poll within the caps did not park";

  // The same address once more: its cap.
  auto refused = send(get(poll), "192.0.2.1");
  ASSERT_TRUE(refused->ready());
  http::Response r = refused->get();
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers.get("Retry-After").value_or(""), "5");
  EXPECT_NE(r.body.find("\"error\":\"Your address has too many polls waiting"), std::string::npos)
      << r.body;
  EXPECT_FALSE(r.headers.get("X-Request-Id").value_or("").empty());  // finished by the pipeline

  // Others fill the process's cap; then everyone is refused.
  parked.push_back(send(get(poll), "192.0.2.2"));
  parked.push_back(send(get(poll), "192.0.2.3"));
  for (auto& p : parked) EXPECT_FALSE(p->ready());
  auto full = send(get(poll), "192.0.2.4");
  ASSERT_TRUE(full->ready());
  r = full->get();
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.body.find("too many clients waiting"), std::string::npos) << r.body;

  // A message frees every place: the first client may park 3 again, not 4.
  EXPECT_EQ(run(say(R"({"text":"news"})"), "192.0.2.9").status, 200);
  for (auto& p : parked) {
    ASSERT_EQ(p->get().status, 200);  // delivered
  }
  parked.clear();
  const std::string next = "/chat/lobby/messages?since=" + std::to_string(last_id()) + "&wait=30";
  for (int i = 0; i < 3; ++i) parked.push_back(send(get(next), "192.0.2.1"));
  for (auto& p : parked) EXPECT_FALSE(p->ready());
  auto fourth = send(get(next), "192.0.2.1");
  ASSERT_TRUE(fourth->ready());
  EXPECT_EQ(fourth->get().status, 429);
}

TEST_F(ChatAppTest, AVanishedClientsPlaceIsFreedBySweep) {
  start({"chat.max_waiters=10", "chat.max_waiters_per_client=1"});
  const std::string poll = "/chat/lobby/messages?since=" + std::to_string(last_id()) + "&wait=30";
  auto first = send(get(poll));
  ASSERT_FALSE(first->ready());
  auto second = send(get(poll));
  ASSERT_TRUE(second->ready()) << "a poll beyond the client's cap parked";
  EXPECT_EQ(second->get().status, 429);
  first->vanish();
  // The watcher sweeps vanished clients every second: wait for the answer it sends.
  ASSERT_TRUE(first->wait_for(std::chrono::seconds(10))) << "the vanished poll was not freed";
  auto again = send(get(poll));
  EXPECT_FALSE(again->ready()) << "the vanished client's place was not given back";
}

// --- bidi controls in names ----------------------------------------------------------------

TEST_F(ChatAppTest, BidiControlsAreStrippedFromNames) {
  start({});
  // "eve" + RLO + "nimda": shown as "eveadmin" in a browser.
  const std::string rlo = "\xE2\x80\xAE";
  auto r = run(say(R"({"name":"eve)" + rlo + R"(nimda","text":"hi )" + rlo + "!\"}"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto m = run(get("/chat/lobby/messages?since=0&wait=0"));
  EXPECT_NE(m.body.find("\"name\":\"evenimda\""), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("\"text\":\"hi " + rlo + "!\""), std::string::npos) << m.body;  // kept
  // Presence names too: LRI..PDI, ALM, RLM around a name.
  run(get("/chat/lobby/messages?since=0&wait=0&name=%E2%81%A6bob%E2%81%A9%D8%9C%E2%80%8F", true));
  EXPECT_NE(who().find("\"bob\""), std::string::npos) << who();
  EXPECT_EQ(who().find("\xE2\x81\xA6"), std::string::npos) << who();
  // A name that was nothing but controls is Anonymous.
  run(say(R"({"name":")" + rlo + rlo + R"(","text":"who?"})"));
  m = run(get("/chat/lobby/messages?since=0&wait=0"));
  EXPECT_NE(m.body.find("\"name\":\"Anonymous\",\"text\":\"who?\""), std::string::npos) << m.body;
}

// --- the API's errors are JSON -------------------------------------------------------------

TEST_F(ChatAppTest, ApiErrorsAreJson) {
  start({});
  auto r = run(get("/chat/lobby/messages?since=-1"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.substr(0, 10), "{\"error\":\"");
  r = run(get("/chat/nosuch/who"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body.substr(0, 10), "{\"error\":\"");
  r = run(say(R"({"text":"   "})"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.substr(0, 10), "{\"error\":\"");
  // Pages keep their HTML error pages.
  EXPECT_EQ(run(get("/chat/nosuch/")).headers.get("Content-Type").value_or("").substr(0, 9),
            "text/html");
}

}  // namespace
}  // namespace kagi::apps
