#include <kagi/fcgi/cgi_params.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace kagi::fcgi {
namespace {

// The params as the server hands them over: "NAME=value" strings, null-terminated.
class Env {
 public:
  explicit Env(std::vector<std::string> entries) : entries_(std::move(entries)) {
    for (auto& e : entries_) ptrs_.push_back(e.data());
    ptrs_.push_back(nullptr);
  }
  char** get() { return ptrs_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> ptrs_;
};

TEST(HeaderName, TranslatesHttpParams) {
  EXPECT_EQ(header_name("HTTP_USER_AGENT"), "User-Agent");
  EXPECT_EQ(header_name("HTTP_COOKIE"), "Cookie");
  EXPECT_EQ(header_name("HTTP_X_CSRF_TOKEN"), "X-Csrf-Token");
  EXPECT_EQ(header_name("CONTENT_TYPE"), "Content-Type");
  EXPECT_EQ(header_name("CONTENT_LENGTH"), "Content-Length");
}

TEST(HeaderName, IgnoresNonHeadersAndHttpoxy) {
  EXPECT_EQ(header_name("REQUEST_METHOD"), "");
  EXPECT_EQ(header_name("HTTP_"), "");
  EXPECT_EQ(header_name("HTTP_PROXY"), "");
  EXPECT_EQ(header_name("SERVER_NAME"), "");
}

TEST(FillRequest, NginxStockParams) {
  Env env({"REQUEST_METHOD=POST", "REQUEST_URI=/bbs/general/?page=2", "QUERY_STRING=page=2",
           "SCRIPT_NAME=/bbs/general/", "REMOTE_ADDR=203.0.113.9", "HTTPS=on",
           "CONTENT_TYPE=application/x-www-form-urlencoded", "CONTENT_LENGTH=12",
           "HTTP_COOKIE=kagi_csrf=abc", "HTTP_HOST=example.org", "HTTP_PROXY=evil:1",
           "SERVER_PORT=443"});
  http::Request r;
  fill_request(env.get(), r);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/bbs/general/?page=2");
  EXPECT_EQ(r.client_address, "203.0.113.9");
  EXPECT_TRUE(r.https);
  EXPECT_EQ(r.headers.get("content-type"), "application/x-www-form-urlencoded");
  EXPECT_EQ(r.headers.get("Cookie"), "kagi_csrf=abc");
  EXPECT_EQ(r.headers.get("Host"), "example.org");
  EXPECT_FALSE(r.headers.has("Proxy"));
  EXPECT_EQ(content_length(r), 12u);
}

TEST(FillRequest, WithoutRequestUriRebuildsTarget) {
  Env env(
      {"REQUEST_METHOD=GET", "SCRIPT_NAME=/app", "PATH_INFO=/chat/lobby", "QUERY_STRING=since=4"});
  http::Request r;
  fill_request(env.get(), r);
  EXPECT_EQ(r.target, "/app/chat/lobby?since=4");
  EXPECT_FALSE(r.https);
  EXPECT_EQ(content_length(r), std::nullopt);
}

TEST(FillRequest, EmptyEnvGivesRoot) {
  Env env({});
  http::Request r;
  fill_request(env.get(), r);
  EXPECT_EQ(r.target, "/");
}

TEST(ContentLength, RejectsNonNumbers) {
  http::Request r;
  r.headers.set("Content-Length", "12x");
  EXPECT_EQ(content_length(r), std::nullopt);
  r.headers.set("Content-Length", "-1");
  EXPECT_EQ(content_length(r), std::nullopt);
  r.headers.set("Content-Length", "");
  EXPECT_EQ(content_length(r), std::nullopt);
  r.headers.set("Content-Length", "0");
  EXPECT_EQ(content_length(r), 0u);
}

TEST(ResponseHead, StatusHeadersCookiesLength) {
  http::Response res = http::Response::text("hello", 404);
  res.headers.set("X-Test", "1");
  http::Cookie cookie;
  cookie.name = "kagi_csrf";
  cookie.value = "t0k";
  res.cookies.push_back(cookie);
  std::string head = response_head(res);
  EXPECT_EQ(head.rfind("Status: 404 Not Found\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("\r\nX-Test: 1\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nSet-Cookie: kagi_csrf=t0k; Path=/; HttpOnly"), std::string::npos)
      << head;
  EXPECT_NE(head.find("\r\nContent-Length: 5\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
}

TEST(ResponseHead, NoLengthWithoutABody) {
  // A HEAD response arrives with its body emptied: claiming length 0 would be wrong.
  http::Response res = http::Response::text("", 200);
  EXPECT_EQ(response_head(res).find("Content-Length"), std::string::npos);
}

TEST(ResponseHead, DropsHeadersThatWouldSplitTheResponse) {
  http::Response res = http::Response::text("");
  res.headers.set("X-Evil", "a\r\nSet-Cookie: owned=1");
  std::string head = response_head(res);
  EXPECT_EQ(head.find("owned"), std::string::npos) << head;
}

}  // namespace
}  // namespace kagi::fcgi
