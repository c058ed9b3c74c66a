// parse_cookies (framework/kagi/http/cookies.cpp).
#include <kagi/http/form.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace kagi::http {
namespace {

using Items = std::vector<Params::Item>;

Items cookies(std::string_view header, const FormLimits& limits = {}) {
  Params out;
  EXPECT_EQ(parse_cookies(header, limits, out), ParseError::kNone) << header;
  return out.items();
}

TEST(Cookies, BrowserForm) {
  EXPECT_EQ(cookies("a=1; b=2"), (Items{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(cookies("sid=abc"), (Items{{"sid", "abc"}}));
  EXPECT_EQ(cookies(""), Items{});
}

TEST(Cookies, SpacesAndTabsAreTrimmed) {
  EXPECT_EQ(cookies("  a = 1 ;\tb=2\t;c=3;"), (Items{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
}

TEST(Cookies, QuotedValuesLoseTheirQuotes) {
  EXPECT_EQ(cookies("a=\"x y\"; b=\"\"; c=\""), (Items{{"a", "x y"}, {"b", ""}, {"c", "\""}}));
  // Only a pair of enclosing quotes is removed.
  EXPECT_EQ(cookies("a=\"\"x\"\""), (Items{{"a", "\"x\""}}));
}

TEST(Cookies, ValuesAreNotDecoded) {
  EXPECT_EQ(cookies("a=%41+b; c=x=y"), (Items{{"a", "%41+b"}, {"c", "x=y"}}));
}

TEST(Cookies, JunkPairsAreSkipped) {
  EXPECT_EQ(cookies("junk; =nameless; ;; a=1;  ; b"), (Items{{"a", "1"}}));
}

TEST(Cookies, DuplicateNamesKeepOrder) {
  Params out;
  ASSERT_EQ(parse_cookies("s=new; s=old", {}, out), ParseError::kNone);
  EXPECT_EQ(out.get("s"), "new");
  EXPECT_EQ(out.all("s").size(), 2u);
}

TEST(Cookies, TooManyIsTheOnlyError) {
  FormLimits limits;
  limits.max_fields = 2;
  EXPECT_EQ(cookies("a=1; b=2; junk", limits).size(), 2u);
  Params out;
  out.add("kept", "1");
  EXPECT_EQ(parse_cookies("a=1; b=2; c=3", limits, out), ParseError::kTooMany);
  EXPECT_EQ(out.items(), (Items{{"kept", "1"}}));
}

}  // namespace
}  // namespace kagi::http
