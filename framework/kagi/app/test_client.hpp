// app/test_client.hpp — runs requests through an App in this process, the way one browser
// would: for the unit tests of a site's own handlers, with no front end and no socket.
//
//   kagi::App app(kagi::Config::load(schema, std::nullopt, {"data.dir=" + tmp, ...}));
//   my_module().mount(app);
//   kagi::TestClient browser(app);
//   EXPECT_EQ(browser.get("/rooms/").status, 200);
//   EXPECT_EQ(browser.post_form("/rooms/a/book", {{"hour", "9"}}).status, 303);
//
// The client keeps the cookies answers set (the CSRF cookie, the session's) and sends them
// back like a browser, with the CSRF token as the _csrf field of every post_form(), so tests
// pass the same CSRF check real browsers do. Thread-safe for distinct clients; one client is for
// one thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kagi/http/request.hpp>
#include <kagi/http/response.hpp>

namespace kagi {

class App;

class TestClient {
 public:
  explicit TestClient(App& app, std::string client_address = "192.0.2.1");

  http::Response get(std::string target);
  // An application/x-www-form-urlencoded POST of `fields` plus _csrf (fetched with a GET of
  // "/" first when the client has no token yet; if "/" shows no form, the client is given a
  // token as a page with a form would give it).
  http::Response post_form(std::string target,
                           const std::vector<std::pair<std::string, std::string>>& fields);
  // Any request, with this client's address and cookie. Waits at most `bound` for the answer
  // (a handler may park the request and answer later); throws std::runtime_error if none came.
  http::Response send(http::Request request,
                      std::chrono::milliseconds bound = std::chrono::seconds(10));

  // The client's CSRF token ("" until an answer set one).
  const std::string& csrf_token() const { return token_; }
  // The value of the cookie `name` the client keeps ("" if none).
  std::string cookie(std::string_view name) const;
  // Forgets every cookie (a fresh browser).
  void clear_cookies();
  // Called the moment the App hands an answer to the front end (which may be before the
  // request's handle() returns): for tests of what happens first.
  void on_answer(std::function<void(const http::Response&)> hook) { on_answer_ = std::move(hook); }

 private:
  App& app_;
  std::string address_;
  std::string token_;
  std::vector<std::pair<std::string, std::string>> cookies_;  // name, value
  std::function<void(const http::Response&)> on_answer_;
};

}  // namespace kagi
