#include "bbs/input.hpp"

#include <gtest/gtest.h>

namespace kagi::apps::bbs {
namespace {

http::Request form(std::string name, std::string subject, std::string body,
                   std::string password = "") {
  http::Request r;
  r.form.fields.add("name", std::move(name));
  r.form.fields.add("subject", std::move(subject));
  r.form.fields.add("body", std::move(body));
  r.form.fields.add("password", std::move(password));
  return r;
}

const InputLimits kLimits{.max_name_chars = 5, .max_subject_chars = 10, .max_body_chars = 20};

TEST(Input, AcceptsAndNormalises) {
  Checked c = check_post(form("  Ann ", "Hi", "line1\r\nline2\x07  ", "pw"), kLimits);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.input.name, "Ann");
  EXPECT_EQ(c.input.body, "line1\nline2");
  EXPECT_EQ(c.input.password, "pw");
}

TEST(Input, EmptyNameIsAnonymousEmptyBodyIsRefused) {
  EXPECT_EQ(check_post(form("", "", "x"), kLimits).input.name, "Anonymous");
  Checked c = check_post(form("a", "b", "  \n "), kLimits);
  EXPECT_FALSE(c.error.empty());
  EXPECT_FALSE(c.bad_encoding);
}

TEST(Input, LimitsCountCharactersNotBytes) {
  EXPECT_EQ(check_post(form("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", "", "x"), kLimits).error,
            "");
  Checked c = check_post(form("abcdef", "", "x"), kLimits);
  EXPECT_NE(c.error.find("Name is longer than 5"), std::string::npos) << c.error;
  EXPECT_FALSE(check_post(form("a", "", std::string(21, 'b')), kLimits).error.empty());
}

TEST(Input, InvalidUtf8IsABadEncoding) {
  Checked c = check_post(form("a", "\xff\xfe", "x"), kLimits);
  EXPECT_TRUE(c.bad_encoding);
  EXPECT_NE(c.error.find("Subject"), std::string::npos);
  EXPECT_TRUE(check_post(form("a", "", "\xc0\xaf"), kLimits).bad_encoding) << "overlong";
}

const util::Secret kKey = util::Secret::from_bytes(std::string(32, 'k'));

TEST(Input, ClientTagsAreStableAndDistinct) {
  EXPECT_EQ(client_tag("127.0.0.1", kKey), client_tag("127.0.0.1", kKey));
  EXPECT_NE(client_tag("127.0.0.1", kKey), client_tag("127.0.0.2", kKey));
  EXPECT_EQ(client_tag("::1", kKey).size(), 16u) << "the format the data files use";
  EXPECT_EQ(client_tag("127.0.0.1", kKey).find("127"), std::string::npos);
}

// An unkeyed hash of an IPv4 address is reversed by hashing all 2^32 addresses. Keyed by the
// server secret, the same address gives an unrelated tag on every site, so the data files
// alone do not give the addresses away.
TEST(Input, ClientTagsAreKeyedByTheServerSecret) {
  const util::Secret other = util::Secret::from_bytes(std::string(32, 'o'));
  for (const char* address : {"127.0.0.1", "192.0.2.7", "::1"}) {
    EXPECT_NE(client_tag(address, kKey), client_tag(address, other)) << address;
  }
}

TEST(Input, NulInTheDeletePasswordIsABadEncoding) {
  Checked c = check_post(form("a", "", "x", std::string("pw\0rest", 7)), kLimits);
  EXPECT_TRUE(c.bad_encoding);
  EXPECT_NE(c.error.find("NUL"), std::string::npos) << c.error;
}

TEST(Input, BidiControlsAreStrippedFromNameAndSubjectButNotBody) {
  // "ab" + RIGHT-TO-LEFT OVERRIDE + "cd", and the other controls around a subject.
  Checked c =
      check_post(form("ab\u202Ecd", "\u2066x\u2069\u200Ey\u200F\u061C", "r\u200Fs"), kLimits);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.input.name, "abcd");
  EXPECT_EQ(c.input.subject, "xy");
  EXPECT_EQ(c.input.body, "r\u200Fs") << "right-to-left writers need the marks in their text";
  // A name of only controls is empty, so it becomes Anonymous.
  EXPECT_EQ(check_post(form("\u202E\u202D", "", "x"), kLimits).input.name, "Anonymous");
}

}  // namespace
}  // namespace kagi::apps::bbs
