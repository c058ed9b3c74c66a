#include <kagi/app/csrf.hpp>

#include <gtest/gtest.h>

#include <set>

namespace kagi {
namespace {

const util::Secret kSecret = util::Secret::from_bytes(std::string(32, 'k'));
const csrf::Tokens kTokens{kSecret};

http::Request with_cookie(const std::string& token, std::string_view name = csrf::kCookie) {
  http::Request r;
  r.method = "POST";
  r.cookies.add(std::string(name), token);
  return r;
}

TEST(Csrf, TokensAreWellFormedSignedAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string t = kTokens.issue();
    EXPECT_TRUE(csrf::well_formed(t)) << t;
    EXPECT_TRUE(kTokens.signed_by_us(t)) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(Csrf, MalformedCookiesAreIgnored) {
  EXPECT_FALSE(csrf::well_formed(""));
  EXPECT_FALSE(csrf::well_formed(std::string(63, 'a') + "F"));
  EXPECT_FALSE(csrf::well_formed(std::string(63, 'a')));
  EXPECT_FALSE(csrf::well_formed("<script>alert(1)</script>" + std::string(39, 'a')));
  EXPECT_EQ(kTokens.cookie_token(with_cookie("short"), false), "");
}

TEST(Csrf, UnsignedOrForeignTokensAreNotOurs) {
  EXPECT_FALSE(kTokens.signed_by_us(std::string(64, 'a'))) << "right shape, no signature";
  const csrf::Tokens other{util::Secret::from_bytes(std::string(32, 'o'))};
  const std::string foreign = other.issue();
  EXPECT_FALSE(kTokens.signed_by_us(foreign)) << "signed under another secret";
  // Each half matters: a signature moved onto another nonce does not verify.
  const std::string a = kTokens.issue(), b = kTokens.issue();
  EXPECT_FALSE(kTokens.signed_by_us(a.substr(0, 32) + b.substr(32)));
  EXPECT_EQ(kTokens.cookie_token(with_cookie(foreign), false), "");
}

TEST(Csrf, FieldOrHeaderMustEqualTheCookie) {
  std::string token = kTokens.issue();
  auto r = with_cookie(token);
  EXPECT_FALSE(kTokens.verify(r, false)) << "nothing submitted";
  r.form.fields.add("_csrf", token);
  EXPECT_TRUE(kTokens.verify(r, false));

  auto h = with_cookie(token);
  h.headers.add("X-CSRF-Token", token);
  EXPECT_TRUE(kTokens.verify(h, false));
}

TEST(Csrf, ForgedOrMissingCookieFails) {
  std::string token = kTokens.issue();
  auto r = with_cookie(kTokens.issue());
  r.form.fields.add("_csrf", token);
  EXPECT_FALSE(kTokens.verify(r, false)) << "token of another client";

  http::Request no_cookie;
  no_cookie.form.fields.add("_csrf", token);
  EXPECT_FALSE(kTokens.verify(no_cookie, false));

  // An attacker who can plant any cookie value, and submit the same value, still fails: the
  // value is not signed by this server.
  const std::string planted = std::string(32, '0') + std::string(32, 'f');
  auto junk = with_cookie(planted);
  junk.form.fields.add("_csrf", planted);
  EXPECT_FALSE(kTokens.verify(junk, false));
}

TEST(Csrf, SecureRequestsReadOnlyTheHostPrefixedCookie) {
  EXPECT_EQ(csrf::cookie_name(true), "__Host-kagi_csrf");
  EXPECT_EQ(csrf::cookie_name(false), "kagi_csrf");
  std::string token = kTokens.issue();
  auto plain = with_cookie(token, csrf::kCookie);
  plain.form.fields.add("_csrf", token);
  EXPECT_TRUE(kTokens.verify(plain, false));
  EXPECT_FALSE(kTokens.verify(plain, true)) << "over HTTPS a plain-named cookie is not read";
  auto host = with_cookie(token, csrf::kSecureCookie);
  host.form.fields.add("_csrf", token);
  EXPECT_TRUE(kTokens.verify(host, true));
}

TEST(Csrf, UnsafeMethods) {
  for (const char* m : {"POST", "PUT", "PATCH", "DELETE"}) EXPECT_TRUE(csrf::is_unsafe_method(m));
  for (const char* m : {"GET", "HEAD", "OPTIONS"}) EXPECT_FALSE(csrf::is_unsafe_method(m));
}

}  // namespace
}  // namespace kagi
