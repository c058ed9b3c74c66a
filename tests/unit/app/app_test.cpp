#include <kagi/app/app.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <thread>

#include <kagi/app/http_error.hpp>
#include <kagi/app/test_client.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/view/page_cache.hpp>
#include <kagi/view/views.hpp>

namespace kagi {
namespace {

// Captures what the pipeline sends; send() may come from another thread (parked requests).
class CapturingResponder : public Responder {
 public:
  void send(http::Response response) override { promise_.set_value(std::move(response)); }
  http::Response get() { return future_.get(); }
  bool ready() { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

 private:
  std::promise<http::Response> promise_;
  std::future<http::Response> future_ = promise_.get_future();
};

class AppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("kagi-app-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_);
    app_ = std::make_unique<App>(Config::load(
        std::nullopt,
        {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
         "locks.dir=" + (root_ / "locks").string(), "data.dir=" + (root_ / "data").string(),
         "log.access=false", "locks.timeout_ms=200", "limits.max_body_bytes=1000"}));
    Router& r = app_->router();
    r.get("/hello", [](Request&, Context&) { return Response::text("hello"); });
    // A page with a form: it asks for the client's CSRF token.
    r.get("/token", [](Request&, Context& ctx) { return Response::text(ctx.csrf_token()); });
    r.post("/form", [](Request& req, Context&) {
      return Response::text("got " + std::string(req.field("x")));
    });
    r.get("/items/{id}", [](Request& req, Context&) {
      return Response::text("item " + std::string(req.param("id")));
    });
    r.get("/teapot", [](Request&, Context&) -> Response { throw HttpError(418, "short & stout"); });
    r.get("/boom", [](Request&, Context&) -> Response { throw std::runtime_error("boom"); });
    r.get("/hold", [this](Request&, Context& ctx) {
      auto guard = ctx.locks.exclusive("test/held");
      held_.set_value();
      release_.get_future().wait();
      return Response::text("held");
    });
    r.get("/take", [](Request&, Context& ctx) {
      auto guard = ctx.locks.exclusive("test/held");
      return Response::text("taken");
    });
    r.get("/leak", [](Request&, Context& ctx) {
      // Moved into a static: outlives the request. The pipeline must release it anyway.
      static lock::ExclusiveGuard leaked;
      leaked = ctx.locks.exclusive("test/held");
      return Response::text("leaked");
    });
    r.get("/park", [this](Request&, Context& ctx) {
      parked_ = ctx.defer();
      return Response::text("ignored");
    });
    // A board page with hostile values, rendered every time or through the page cache.
    auto fill = [](view::Dict& dict) {
      dict.set("BOARD", "b\"'<>&{{CSRF}}");
      for (int i = 0; i < 3; ++i) {
        view::Dict post = dict.add_section("POST");
        post.set("ID", i);
        post.set("NAME", "</bdi><script>alert(1)</script>");
        post.set("SUBJECT", "{{CSRF}} \" onmouseover=x");
        post.set_trusted_html("BODY_HTML", "<p>kagi0123 &amp; text</p>");
        post.show_section("DELETABLE");
      }
    };
    r.get("/board/fresh", [fill](Request&, Context& ctx) {
      view::Dict dict;
      fill(dict);
      return ctx.render("bbs/board.html", dict);
    });
    r.get("/board/cached/{version}", [this, fill](Request& req, Context& ctx) {
      ++cached_renders_;
      return ctx.render_cached(pages_, "board", std::stoull(std::string(req.param("version"))),
                               "bbs/board.html", [&](view::Dict& dict) {
                                 ++fills_;
                                 fill(dict);
                               });
    });
    token_ = run(get("/token")).cookies.at(0).value;  // a token this app signed
  }
  void TearDown() override {
    app_.reset();
    std::filesystem::remove_all(root_);
  }

  http::Response run(http::Request req) {
    auto out = std::make_shared<CapturingResponder>();
    if (req.client_address.empty()) req.client_address = "127.0.0.1";
    app_->handle(std::move(req), out);
    EXPECT_TRUE(out->ready()) << "no response sent";
    return out->get();
  }
  static http::Request get(std::string target) {
    http::Request r;
    r.method = "GET";
    r.target = std::move(target);
    return r;
  }
  static http::Request post(std::string target, std::string body, std::string token) {
    http::Request r;
    r.method = "POST";
    r.target = std::move(target);
    r.headers.add("Content-Type", "application/x-www-form-urlencoded");
    if (!token.empty()) r.headers.add("Cookie", "kagi_csrf=" + token);
    r.body = std::move(body);
    return r;
  }

  std::filesystem::path root_;
  std::unique_ptr<App> app_;
  std::string token_;
  std::promise<void> held_, release_;
  Deferred parked_;
  view::PageCache pages_{8};
  int cached_renders_ = 0, fills_ = 0;
};

TEST_F(AppTest, ServesAndAddsSecurityHeaders) {
  auto r = run(get("/hello"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.headers.get("Content-Security-Policy").has_value());
  EXPECT_EQ(r.headers.get("X-Content-Type-Options").value_or(""), "nosniff");
  EXPECT_EQ(r.headers.get("X-Frame-Options").value_or(""), "DENY");
  EXPECT_FALSE(r.headers.get("X-Request-Id").value_or("").empty());
}

TEST_F(AppTest, SetsTheCsrfCookieOnlyWhenMissing) {
  auto r = run(get("/token"));
  ASSERT_EQ(r.cookies.size(), 1u);
  EXPECT_EQ(r.cookies[0].name, "kagi_csrf");
  EXPECT_EQ(r.cookies[0].value, r.body) << "the cookie holds the token the page rendered";
  EXPECT_TRUE(r.cookies[0].http_only);
  EXPECT_EQ(r.cookies[0].same_site, "Lax");
  EXPECT_FALSE(r.cookies[0].secure);
  auto with = get("/token");
  with.headers.add("Cookie", "kagi_csrf=" + token_);
  r = run(std::move(with));
  EXPECT_TRUE(r.cookies.empty());
  EXPECT_EQ(r.body, token_);
  auto https = get("/token");
  https.https = true;
  EXPECT_TRUE(run(std::move(https)).cookies.at(0).secure);
}

// An answer that shows no form (a hello, JSON, a 404) sets no cookie: nothing would use it,
// and a Set-Cookie on every answer keeps shared caches from keeping any of them.
TEST_F(AppTest, AnAnswerThatNeverAsksForTheTokenSetsNoCookie) {
  EXPECT_TRUE(run(get("/hello")).cookies.empty());
  EXPECT_TRUE(run(get("/nothing-here")).cookies.empty());
  // A planted cookie is left alone until a page asks for the token, and replaced then.
  const std::string planted = std::string(64, 'a');
  auto hello = get("/hello");
  hello.headers.add("Cookie", "kagi_csrf=" + planted);
  EXPECT_TRUE(run(std::move(hello)).cookies.empty());
  auto page = get("/token");
  page.headers.add("Cookie", "kagi_csrf=" + planted);
  const http::Response r = run(std::move(page));
  ASSERT_EQ(r.cookies.size(), 1u);
  EXPECT_NE(r.cookies[0].value, planted);
  EXPECT_EQ(r.cookies[0].value, r.body);
  // A parked answer may be rendered after defer(): it carries the cookie made at defer().
  auto out = std::make_shared<CapturingResponder>();
  app_->handle(get("/park"), out);
  ASSERT_TRUE(static_cast<bool>(parked_));
  ASSERT_TRUE(parked_.complete(Response::text("late")));
  EXPECT_EQ(out->get().cookies.size(), 1u);
}

// A kept page, served to each client with its own token, is byte for byte the page rendering
// it for that client gives; a new version renders again.
TEST_F(AppTest, ACachedPageIsTheRenderedPageWithTheReadersToken) {
  const std::string other = run(get("/token")).cookies.at(0).value;
  ASSERT_NE(other, token_);
  auto as = [](std::string target, const std::string& token) {
    http::Request r = get(std::move(target));
    r.headers.add("Cookie", "kagi_csrf=" + token);
    return r;
  };
  for (const std::string& token : {token_, other, token_}) {
    const http::Response fresh = run(as("/board/fresh", token));
    const http::Response cached = run(as("/board/cached/1", token));
    ASSERT_EQ(fresh.status, 200);
    EXPECT_EQ(cached.status, 200);
    EXPECT_EQ(cached.body, fresh.body);
    EXPECT_EQ(cached.headers.get("Content-Type"), fresh.headers.get("Content-Type"));
    EXPECT_NE(cached.body.find(token), std::string::npos);
    EXPECT_EQ(cached.body.find(pages_.marker()), std::string::npos);
  }
  EXPECT_EQ(cached_renders_, 3);
  EXPECT_EQ(fills_, 1) << "the second and third readers got the kept page";
  EXPECT_EQ(run(as("/board/cached/2", other)).body, run(as("/board/fresh", other)).body);
  EXPECT_EQ(fills_, 2) << "a new version is rendered again";
}

TEST_F(AppTest, PathParamsAndDecoding) {
  EXPECT_EQ(run(get("/items/a%20b?x=1")).body, "item a b");
  EXPECT_EQ(run(get("/items/%zz")).status, 400);
  EXPECT_EQ(run(get("/items/a%00b")).status, 400);
  EXPECT_EQ(run(get("no-slash")).status, 400);
}

TEST_F(AppTest, NotFoundAndMethodNotAllowed) {
  auto r = run(get("/nothing"));
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("404"), std::string::npos);
  auto m = run(post("/hello", "", token_));
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.headers.get("Allow").value_or(""), "GET, HEAD");
}

TEST_F(AppTest, PostNeedsAMatchingCsrfToken) {
  EXPECT_EQ(run(post("/form", "x=1", "")).status, 403);
  EXPECT_EQ(run(post("/form", "x=1", token_)).status, 403) << "cookie but no field";
  EXPECT_EQ(run(post("/form", "x=1&_csrf=ffffffffffffffffffffffffffffffff", token_)).status, 403);
  auto ok = run(post("/form", "x=1&_csrf=" + token_, token_));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "got 1");
  auto header = post("/form", "x=2", token_);
  header.headers.add("X-CSRF-Token", token_);
  EXPECT_EQ(run(std::move(header)).body, "got 2");
}

TEST_F(AppTest, BodyLimitsAndBrokenEncodings) {
  EXPECT_EQ(run(post("/form", "x=" + std::string(2000, 'a') + "&_csrf=" + token_, token_)).status,
            413);
  EXPECT_EQ(run(post("/form", "x=%G1&_csrf=" + token_, token_)).status, 400);
}

TEST_F(AppTest, HandlerErrorsBecomeErrorPages) {
  auto teapot = run(get("/teapot"));
  EXPECT_EQ(teapot.status, 418);
  EXPECT_NE(teapot.body.find("short &amp; stout"), std::string::npos) << teapot.body;
  auto boom = run(get("/boom"));
  EXPECT_EQ(boom.status, 500);
  EXPECT_EQ(boom.body.find("boom"), std::string::npos) << "internal details must not leak";
}

TEST_F(AppTest, BusyLockIs503WithRetryAfter) {
  std::thread holder([&] { EXPECT_EQ(run(get("/hold")).status, 200); });
  held_.get_future().wait();
  auto busy = run(get("/take"));
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers.get("Retry-After").value_or(""), "2");
  EXPECT_NE(busy.body.find("Busy"), std::string::npos);
  release_.set_value();
  holder.join();
  EXPECT_EQ(run(get("/take")).status, 200);
}

TEST_F(AppTest, LeakedGuardIsReleasedAtRequestEnd) {
  EXPECT_EQ(run(get("/leak")).status, 200);
  EXPECT_EQ(run(get("/take")).status, 200) << "the leaked lock was not released";
}

TEST_F(AppTest, ParkedRequestCompletesLaterFromAnotherThread) {
  auto out = std::make_shared<CapturingResponder>();
  http::Request req = get("/park");
  req.client_address = "127.0.0.1";
  app_->handle(std::move(req), out);
  EXPECT_FALSE(out->ready());
  ASSERT_TRUE(static_cast<bool>(parked_));
  std::thread([d = parked_] { EXPECT_TRUE(d.complete(Response::json("{\"id\":1}"))); }).join();
  ASSERT_TRUE(out->ready());
  auto r = out->get();
  EXPECT_EQ(r.body, "{\"id\":1}");
  EXPECT_TRUE(r.headers.has("X-Request-Id")) << "finishing steps ran";
  EXPECT_FALSE(parked_.complete(Response::text("again"))) << "completes once";
}

TEST_F(AppTest, CountsRequestsPerRouteAndStatus) {
  run(get("/items/1"));
  run(get("/items/2"));
  auto head = get("/items/3");
  head.method = "HEAD";
  run(std::move(head));
  run(get("/teapot"));
  run(get("/nothing"));
  run(post("/form", "x=1", ""));  // 403: matched its route, failed the CSRF check
  auto parked_out = std::make_shared<CapturingResponder>();
  app_->handle(get("/park"), parked_out);  // parked: not finished, not counted yet
  RequestStatsSnapshot s = app_->requests().snapshot();
  EXPECT_EQ(s.routes.at("GET /items/{id}").by_status.at(200), 3u) << "HEAD counts under GET";
  EXPECT_EQ(s.routes.at("GET /teapot").by_status.at(418), 1u);
  EXPECT_EQ(s.routes.at(std::string(kNoRoute)).by_status.at(404), 1u);
  EXPECT_EQ(s.routes.at("POST /form").by_status.at(403), 1u);
  EXPECT_EQ(s.routes.count("GET /park"), 0u);
  ASSERT_TRUE(parked_.complete(Response::text("late")));
  EXPECT_EQ(app_->requests().snapshot().routes.at("GET /park").by_status.at(200), 1u);
}

TEST_F(AppTest, ErrorPageEscapesItsMessage) {
  auto page = app_->error_page(400, "<script>alert(1)</script>");
  EXPECT_EQ(page.body.find("<script>"), std::string::npos);
  EXPECT_NE(page.body.find("&lt;script&gt;"), std::string::npos);
}

// A cookie planted by someone else (a sibling subdomain, a plain-HTTP man in the middle) with
// the same value in the form: the value has the right shape but no signature of this server.
TEST_F(AppTest, PlantedUnsignedCookieIsRefusedAndReplaced) {
  const std::string planted = std::string(64, 'a');
  auto r = run(post("/form", "x=1&_csrf=" + planted, planted));
  EXPECT_EQ(r.status, 403);
  ASSERT_EQ(r.cookies.size(), 1u) << "the planted cookie is replaced";
  EXPECT_NE(r.cookies[0].value, planted);
  EXPECT_EQ(r.cookies[0].value.size(), 64u);
  // The token of the old format (32 hex, unsigned) is refused the same way.
  const std::string old = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(run(post("/form", "x=1&_csrf=" + old, old)).status, 403);
  // A signed token with one character of its signature changed is refused.
  std::string tampered = token_;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_EQ(run(post("/form", "x=1&_csrf=" + tampered, tampered)).status, 403);
  EXPECT_EQ(run(post("/form", "x=1&_csrf=" + token_, token_)).status, 200);
}

TEST_F(AppTest, HttpsUsesTheHostPrefixedCookie) {
  auto https_get = get("/token");
  https_get.https = true;
  auto r = run(std::move(https_get));
  ASSERT_EQ(r.cookies.size(), 1u);
  EXPECT_EQ(r.cookies[0].name, "__Host-kagi_csrf");
  EXPECT_TRUE(r.cookies[0].secure);
  EXPECT_EQ(r.cookies[0].path, "/");
  const std::string secure_token = r.cookies[0].value;

  auto ok = post("/form", "x=1&_csrf=" + secure_token, "");
  ok.https = true;
  ok.headers.add("Cookie", "__Host-kagi_csrf=" + secure_token);
  EXPECT_EQ(run(std::move(ok)).status, 200);
  // Over HTTPS the plain-named cookie counts for nothing, even holding a signed token: it is
  // the one a sibling subdomain or a plain-HTTP page could have set.
  auto plain = post("/form", "x=1&_csrf=" + token_, token_);
  plain.https = true;
  EXPECT_EQ(run(std::move(plain)).status, 403);
}

// TestClient takes an answer given after handle() returned (a parked request answered from
// another thread), and gives up at its bound when none comes.
TEST_F(AppTest, TestClientWaitsForALateAnswerUpToItsBound) {
  std::thread answerer;
  app_->router().get("/later", [&answerer](Request&, Context& ctx) {
    answerer = std::thread([d = ctx.defer()] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      d.complete(Response::text("later"));
    });
    return Response::text("unused: the request is parked");
  });
  TestClient browser(*app_);
  const http::Response late = browser.get("/later");
  answerer.join();
  EXPECT_EQ(late.status, 200);
  EXPECT_EQ(late.body, "later");

  http::Request never;
  never.method = "GET";
  never.target = "/park";
  EXPECT_THROW(browser.send(never, std::chrono::milliseconds(50)), std::runtime_error);
  ASSERT_TRUE(static_cast<bool>(parked_));
  EXPECT_TRUE(parked_.complete(Response::text("too late")));  // to nobody waiting: no harm
}

}  // namespace
}  // namespace kagi
