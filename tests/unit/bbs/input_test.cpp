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

TEST(Input, ClientTagsAreStableAndDistinct) {
  EXPECT_EQ(client_tag("127.0.0.1"), client_tag("127.0.0.1"));
  EXPECT_NE(client_tag("127.0.0.1"), client_tag("127.0.0.2"));
  EXPECT_EQ(client_tag("::1").size(), 16u);
  EXPECT_EQ(client_tag("127.0.0.1").find("127"), std::string::npos);
}

}  // namespace
}  // namespace kagi::apps::bbs
