#include "app/csrf.hpp"

#include <gtest/gtest.h>

#include <set>

namespace kagi {
namespace {

http::Request with_cookie(const std::string& token) {
  http::Request r;
  r.method = "POST";
  r.cookies.add("kagi_csrf", token);
  return r;
}

TEST(Csrf, TokensAreWellFormedAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string t = csrf::new_token();
    EXPECT_TRUE(csrf::well_formed(t)) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(Csrf, MalformedCookiesAreIgnored) {
  EXPECT_FALSE(csrf::well_formed(""));
  EXPECT_FALSE(csrf::well_formed("0123456789abcdef0123456789abcdeF"));
  EXPECT_FALSE(csrf::well_formed("0123456789abcdef0123456789abcde"));
  EXPECT_FALSE(csrf::well_formed("<script>alert(1)</script>aaaaaaa"));
  EXPECT_EQ(csrf::cookie_token(with_cookie("short")), "");
}

TEST(Csrf, FieldOrHeaderMustEqualTheCookie) {
  std::string token = csrf::new_token();
  auto r = with_cookie(token);
  EXPECT_FALSE(csrf::verify(r)) << "nothing submitted";
  r.form.fields.add("_csrf", token);
  EXPECT_TRUE(csrf::verify(r));

  auto h = with_cookie(token);
  h.headers.add("X-CSRF-Token", token);
  EXPECT_TRUE(csrf::verify(h));
}

TEST(Csrf, ForgedOrMissingCookieFails) {
  std::string token = csrf::new_token();
  auto r = with_cookie(csrf::new_token());
  r.form.fields.add("_csrf", token);
  EXPECT_FALSE(csrf::verify(r)) << "token of another client";

  http::Request no_cookie;
  no_cookie.form.fields.add("_csrf", token);
  EXPECT_FALSE(csrf::verify(no_cookie));

  // An attacker who can set any cookie value still has to match a well-formed one.
  auto junk = with_cookie("x");
  junk.form.fields.add("_csrf", "x");
  EXPECT_FALSE(csrf::verify(junk));
}

TEST(Csrf, UnsafeMethods) {
  for (const char* m : {"POST", "PUT", "PATCH", "DELETE"}) EXPECT_TRUE(csrf::is_unsafe_method(m));
  for (const char* m : {"GET", "HEAD", "OPTIONS"}) EXPECT_FALSE(csrf::is_unsafe_method(m));
}

}  // namespace
}  // namespace kagi
