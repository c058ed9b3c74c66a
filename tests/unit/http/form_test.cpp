// parse_urlencoded, describe and http_status (framework/kagi/http/form.cpp).
#include <kagi/http/form.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace kagi::http {
namespace {

using namespace std::string_literals;
using Items = std::vector<Params::Item>;

Items parse_ok(std::string_view in, const FormLimits& limits = {}) {
  Params out;
  EXPECT_EQ(parse_urlencoded(in, limits, out), ParseError::kNone) << in;
  return out.items();
}

ParseError parse_error(std::string_view in, const FormLimits& limits = {}) {
  Params out;
  out.add("kept", "1");
  const ParseError e = parse_urlencoded(in, limits, out);
  // A rejected input leaves what was there before untouched.
  EXPECT_EQ(out.items(), (Items{{"kept", "1"}})) << in;
  return e;
}

TEST(Describe, NamesEveryErrorAndItsStatus) {
  EXPECT_EQ(http_status(ParseError::kNone), 200);
  EXPECT_EQ(http_status(ParseError::kMalformed), 400);
  EXPECT_EQ(http_status(ParseError::kTooMany), 413);
  EXPECT_EQ(http_status(ParseError::kTooLarge), 413);
  EXPECT_STRNE(describe(ParseError::kMalformed), describe(ParseError::kTooMany));
  EXPECT_STRNE(describe(ParseError::kTooMany), describe(ParseError::kTooLarge));
  EXPECT_NE(std::string(describe(ParseError::kTooLarge)).find("large"), std::string::npos);
}

TEST(Urlencoded, SimplePairsInOrder) {
  EXPECT_EQ(parse_ok("a=1&b=2&a=3"), (Items{{"a", "1"}, {"b", "2"}, {"a", "3"}}));
}

TEST(Urlencoded, EmptyInputHasNoFields) { EXPECT_EQ(parse_ok(""), Items{}); }

TEST(Urlencoded, DecodesPlusAndEscapesInNamesAndValues) {
  EXPECT_EQ(parse_ok("first+name=J%C3%BCrgen+M&x%5B%5D=a%26b%3Dc"),
            (Items{{"first name", "J\xc3\xbcrgen M"}, {"x[]", "a&b=c"}}));
}

TEST(Urlencoded, NameAloneHasEmptyValue) {
  EXPECT_EQ(parse_ok("flag&b="), (Items{{"flag", ""}, {"b", ""}}));
}

TEST(Urlencoded, OnlyTheFirstEqualsSplits) {
  EXPECT_EQ(parse_ok("eq=a=b=="), (Items{{"eq", "a=b=="}}));
}

TEST(Urlencoded, EmptyNameIsKept) { EXPECT_EQ(parse_ok("=v&="), (Items{{"", "v"}, {"", ""}})); }

TEST(Urlencoded, EmptyPairsAreSkipped) {
  EXPECT_EQ(parse_ok("&&a=1&&&b=2&"), (Items{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(parse_ok("&&&"), Items{});
}

TEST(Urlencoded, SemicolonIsNotASeparator) {
  EXPECT_EQ(parse_ok("a=1;b=2"), (Items{{"a", "1;b=2"}}));
}

TEST(Urlencoded, NulAndCrlfDecodeAsBytes) {
  EXPECT_EQ(parse_ok("n%00ul=v%00&cr%0D%0Alf=x"), (Items{{"n\0ul"s, "v\0"s}, {"cr\r\nlf", "x"}}));
}

TEST(Urlencoded, AppendsToExistingParams) {
  Params out;
  out.add("old", "0");
  ASSERT_EQ(parse_urlencoded("a=1", {}, out), ParseError::kNone);
  EXPECT_EQ(out.items(), (Items{{"old", "0"}, {"a", "1"}}));
}

TEST(Urlencoded, BadEscapesAreMalformed) {
  EXPECT_EQ(parse_error("a=%"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("a=%2"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("a=%zz"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("ok=1&%=x"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("a=1&b=%4"), ParseError::kMalformed);
}

TEST(Urlencoded, FieldCountLimit) {
  FormLimits limits;
  limits.max_fields = 3;
  EXPECT_EQ(parse_ok("a&b&c", limits).size(), 3u);
  EXPECT_EQ(parse_ok("a&&b&&c&&", limits).size(), 3u);  // empty pairs do not count
  EXPECT_EQ(parse_error("a&b&c&d", limits), ParseError::kTooMany);
  limits.max_fields = 0;
  EXPECT_EQ(parse_ok("", limits).size(), 0u);
  EXPECT_EQ(parse_error("a", limits), ParseError::kTooMany);
}

TEST(Urlencoded, HugeFieldCountIsRejected) {
  std::string in;
  for (int i = 0; i < 100000; ++i) in += "x=1&";
  EXPECT_EQ(parse_error(in), ParseError::kTooMany);  // default limit: 1000
}

TEST(Urlencoded, FieldSizeLimitAppliesToDecodedBytes) {
  FormLimits limits;
  limits.max_field_bytes = 4;
  EXPECT_EQ(parse_ok("abcd=wxyz", limits), (Items{{"abcd", "wxyz"}}));
  // 12 encoded bytes, 4 decoded: within the limit.
  EXPECT_EQ(parse_ok("n=%41%42%43%44", limits), (Items{{"n", "ABCD"}}));
  EXPECT_EQ(parse_error("n=abcde", limits), ParseError::kTooLarge);
  EXPECT_EQ(parse_error("abcde=v", limits), ParseError::kTooLarge);
  EXPECT_EQ(parse_error("n=%41%42%43%44%45", limits), ParseError::kTooLarge);
}

TEST(Urlencoded, HugeFieldIsRejected) {
  const std::string in = "big=" + std::string(10 * 1024 * 1024, 'a');
  EXPECT_EQ(parse_error(in), ParseError::kTooLarge);  // default limit: 64 KiB
}

TEST(Urlencoded, EncodeThenParseRoundTrips) {
  const Items fields = {{"name", "a b&c=d"}, {"", "\0\r\n"s}, {"\xe6\x97\xa5", "+%"}};
  std::string encoded;
  for (const auto& [name, value] : fields) {
    if (!encoded.empty()) encoded += '&';
    encoded += percent_encode(name) + "=" + percent_encode(value);
  }
  EXPECT_EQ(parse_ok(encoded), fields);
}

}  // namespace
}  // namespace kagi::http
