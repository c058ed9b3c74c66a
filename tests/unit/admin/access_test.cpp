#include "admin/access.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <kagi/app/http_error.hpp>
#include <kagi/util/password.hpp>
#include "../support/temp_dir.hpp"

namespace kagi::apps::admin {
namespace {

using test_support::TempDir;

TEST(Base64DecodeTest, DecodesPaddedInput) {
  EXPECT_EQ(base64_decode("YWRtaW46czNjcmV0"), "admin:s3cret");
  EXPECT_EQ(base64_decode("YQ=="), "a");
  EXPECT_EQ(base64_decode("YWI="), "ab");
  EXPECT_EQ(base64_decode(""), "");
}

TEST(Base64DecodeTest, RejectsAnythingNotStrict) {
  EXPECT_FALSE(base64_decode("YQ"));        // missing padding
  EXPECT_FALSE(base64_decode("Y==="));      // padding too early
  EXPECT_FALSE(base64_decode("YQ==YWI="));  // padding in the middle
  EXPECT_FALSE(base64_decode("YW I="));     // space
  EXPECT_FALSE(base64_decode("YW-_"));      // URL alphabet
  EXPECT_FALSE(base64_decode("Y=Q="));
}

TEST(ParseBasicAuthTest, SplitsUserAndPasswordAtTheFirstColon) {
  auto c = parse_basic_auth("Basic YWRtaW46czNjOnJldA==");  // admin:s3c:ret
  ASSERT_TRUE(c);
  EXPECT_EQ(c->user, "admin");
  EXPECT_EQ(c->password, "s3c:ret");
  EXPECT_TRUE(parse_basic_auth("basic YWRtaW46czNjcmV0"));  // scheme is case-insensitive
}

TEST(ParseBasicAuthTest, RejectsOtherSchemesAndMalformedValues) {
  EXPECT_FALSE(parse_basic_auth("Bearer YWRtaW46czNjcmV0"));
  EXPECT_FALSE(parse_basic_auth("Basic"));
  EXPECT_FALSE(parse_basic_auth("Basic "));
  EXPECT_FALSE(parse_basic_auth("Basic YWRtaW4="));  // "admin": no colon
  EXPECT_FALSE(parse_basic_auth("Basic OnBhc3M="));  // ":pass": empty user
  EXPECT_FALSE(parse_basic_auth("Basic !!!!"));
  EXPECT_FALSE(parse_basic_auth("Basic " + std::string(2000, 'A')));  // over the bound
}

TEST(NormalizeAddressTest, UnmapsIpv4AndStripsBrackets) {
  EXPECT_EQ(normalize_address("::ffff:127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(normalize_address("[::1]"), "::1");
  EXPECT_EQ(normalize_address("10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(normalize_address("::ffff:abcd"), "::ffff:abcd");  // not a mapped IPv4 address
}

TEST(ParseHtpasswdTest, SkipsCommentsBlankAndBrokenLines) {
  auto users = parse_htpasswd("# comment\nalice:$2y$10$x\r\n\nnocolon\n:nouser\nbob:$y$j9T$y");
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users["alice"], "$2y$10$x");
  EXPECT_EQ(users["bob"], "$y$j9T$y");
}

std::string basic(const std::string& user_password) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < user_password.size(); i += 3) {
    uint32_t n = (uint8_t(user_password[i]) << 16) | (uint8_t(user_password[i + 1]) << 8) |
                 uint8_t(user_password[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  const size_t rest = user_password.size() - i;
  if (rest > 0) {
    uint32_t n = uint8_t(user_password[i]) << 16;
    if (rest == 2) n |= uint8_t(user_password[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return "Basic " + out;
}

TEST(AdminAccessTest, OffWithoutAnHtpasswdFile) {
  AdminAccess access("", {"127.0.0.1"});
  EXPECT_FALSE(access.enabled());
  EXPECT_EQ(access.check("127.0.0.1", basic("a:b")), Access::kOff);
}

TEST(AdminAccessTest, ChecksAddressBeforeCredentials) {
  TempDir dir;
  const std::string file =
      dir.write("admin.htpasswd", "admin:" + util::hash_password("s3cret").value() + "\n");
  AdminAccess access(file, {"127.0.0.1", "::1"});
  // A stranger gets 403 whatever it sends, and costs no hash: were the address checked after
  // the password, any address could make the server run bcrypt (and learn from 401 vs 403
  // which passwords are right).
  const uint64_t before = util::password_verifications();
  EXPECT_EQ(access.check("10.1.2.3", basic("admin:s3cret")), Access::kForbidden);
  EXPECT_EQ(access.check("10.1.2.3", basic("admin:wrong")), Access::kForbidden);
  EXPECT_EQ(access.check("10.1.2.3", basic("nobody:s3cret")), Access::kForbidden);
  EXPECT_EQ(access.check("10.1.2.3", std::nullopt), Access::kForbidden);
  EXPECT_EQ(access.check("10.1.2.3", "Basic !!!!"), Access::kForbidden);
  EXPECT_EQ(util::password_verifications(), before) << "a disallowed address ran a hash";
  // The counter does move for an allowed address, so the check above can fail.
  EXPECT_EQ(access.check("127.0.0.1", basic("admin:wrong")), Access::kUnauthorized);
  EXPECT_GT(util::password_verifications(), before);

  EXPECT_EQ(access.check("127.0.0.1", std::nullopt), Access::kUnauthorized);
  EXPECT_EQ(access.check("127.0.0.1", basic("nobody:s3cret")), Access::kUnauthorized);
  EXPECT_EQ(access.check("127.0.0.1", basic("admin:s3cret")), Access::kAllowed);
  EXPECT_EQ(access.check("::ffff:127.0.0.1", basic("admin:s3cret")), Access::kAllowed);
  EXPECT_EQ(access.check("::1", basic("admin:s3cret")), Access::kAllowed);
}

TEST(AdminAccessTest, ReloadsTheFileWhenItChanges) {
  TempDir dir;
  const std::string file =
      dir.write("admin.htpasswd", "alice:" + util::hash_password("one").value() + "\n");
  AdminAccess access(file, {"127.0.0.1"});
  EXPECT_EQ(access.check("127.0.0.1", basic("alice:one")), Access::kAllowed);
  // A longer file: the size differs even if the mtime's granularity hides the change.
  dir.write("admin.htpasswd", "# rotated\nbob:" + util::hash_password("two").value() + "\n");
  EXPECT_EQ(access.check("127.0.0.1", basic("alice:one")), Access::kUnauthorized);
  EXPECT_EQ(access.check("127.0.0.1", basic("bob:two")), Access::kAllowed);
}

TEST(AdminAccessTest, MissingFileDeniesEveryone) {
  TempDir dir;
  AdminAccess access(dir.path() + "/absent.htpasswd", {"127.0.0.1"});
  EXPECT_EQ(access.check("127.0.0.1", basic("admin:s3cret")), Access::kUnauthorized);
}

// --- login timing and back-off ----------------------------------------------------------

// Wall time of one call of `f`, in microseconds.
template <typename F>
double time_us(F f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

// An unknown user name must cost what a known user's wrong password costs: otherwise the time
// of a 401 tells which user names exist. The entry is bcrypt at cost 5 (~2 ms): a stand-in of
// another cost (the old fixed cost-10 dummy: ~60 ms) shows as a ratio far above 3.
TEST(AdminAccessTest, UnknownUserTakesAsLongAsAWrongPassword) {
  TempDir dir;
  const auto hash = util::hash_password_like("s3cret", "$2b$05$abcdefghijklmnopqrstuu");
  ASSERT_TRUE(hash) << "libxcrypt without bcrypt";
  const std::string file = dir.write("admin.htpasswd", "admin:" + *hash + "\n");
  AdminAccess access(file, {"127.0.0.1", "127.0.0.2"});
  ASSERT_EQ(access.check("127.0.0.1", basic("admin:s3cret")), Access::kAllowed);  // loads it
  // Interleaved tries from two addresses that succeed in between, so the back-off never
  // starts. The fastest of 15 tries per side is compared: load on the machine only ever adds
  // time, so the minimum is the cost of the check itself.
  double unknown = 1e12, known = 1e12;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 3; ++i) {
      unknown =
          std::min(unknown, time_us([&] { access.check("127.0.0.1", basic("nobody:s3cret")); }));
      known = std::min(known, time_us([&] { access.check("127.0.0.2", basic("admin:wrong")); }));
    }
    access.check("127.0.0.1", basic("admin:s3cret"));
    access.check("127.0.0.2", basic("admin:s3cret"));
  }
  const double ratio = std::max(unknown, known) / std::max(1.0, std::min(unknown, known));
  std::printf("login check: unknown user %.0f us, known user wrong password %.0f us, ratio %.2f\n",
              unknown, known, ratio);
  EXPECT_LT(ratio, 3.0);
}

TEST(AdminAccessTest, FailedLoginsBackOffWithRetryAfter) {
  TempDir dir;
  const std::string file =
      dir.write("admin.htpasswd", "admin:" + util::hash_password("s3cret").value() + "\n");
  AdminAccess access(file, {"127.0.0.1", "::1"});
  for (int i = 0; i < AdminAccess::kFreeFailures; ++i) {
    EXPECT_EQ(access.check("127.0.0.1", basic("admin:guess" + std::to_string(i))),
              Access::kUnauthorized);
  }
  try {
    access.check("127.0.0.1", basic("admin:s3cret"));
    FAIL() << "no back-off after " << AdminAccess::kFreeFailures << " failures";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 429);
    EXPECT_EQ(e.headers().get("Retry-After").value_or(""), "1");
  }
  EXPECT_EQ(access.check("::1", basic("admin:s3cret")), Access::kAllowed) << "per address";
  EXPECT_EQ(access.check("127.0.0.1", std::nullopt), Access::kUnauthorized)
      << "no credentials: the browser's first request is never refused with 429";
}

TEST(LoginBackoffTest, DoublesUpToTheCapAndSuccessClears) {
  LoginBackoff b(2, 10, 100);
  b.failed("a", 100'000);
  EXPECT_EQ(b.wait_ms("a", 100'000), 0) << "a free failure";
  b.failed("a", 100'000);
  EXPECT_EQ(b.wait_ms("a", 100'000), 1000);
  EXPECT_EQ(b.wait_ms("a", 101'000), 0) << "the wait is over";
  b.failed("a", 101'000);
  EXPECT_EQ(b.wait_ms("a", 101'000), 2000);
  b.failed("a", 103'000);
  EXPECT_EQ(b.wait_ms("a", 103'000), 4000);
  b.failed("a", 107'000);
  EXPECT_EQ(b.wait_ms("a", 107'000), 8000);
  for (int i = 0; i < 100; ++i) b.failed("a", 200'000);
  EXPECT_EQ(b.wait_ms("a", 200'000), 10'000) << "capped";
  b.succeeded("a");
  EXPECT_EQ(b.wait_ms("a", 200'000), 0);
}

// A failure late in a second still waits its whole second (in whole seconds it waited ~0).
TEST(LoginBackoffTest, AFailureLateInASecondWaitsTheWholeSecond) {
  LoginBackoff b(1, 10, 100);  // the first failure waits 1 s
  b.failed("a", 100'999);
  EXPECT_EQ(b.wait_ms("a", 101'000), 999);
}

TEST(LoginBackoffTest, TheTableStaysBounded) {
  LoginBackoff b(0, 60, 4);
  for (int i = 0; i < 100; ++i) {
    b.failed("10.0.0." + std::to_string(i), i * 1000);
    EXPECT_LE(b.size(), 4u);
  }
  EXPECT_GT(b.wait_ms("10.0.0.99", 99'000), 0) << "the newest are remembered";
}

}  // namespace
}  // namespace kagi::apps::admin
