#include <kagi/http/json_body.hpp>

#include <gtest/gtest.h>

#include <random>

namespace kagi::http {
namespace {

std::optional<std::map<std::string, std::string, std::less<>>> parse(std::string_view body,
                                                                     std::string* error = nullptr) {
  std::string e;
  auto r = parse_flat_json_object(body, e);
  if (error) *error = e;
  EXPECT_EQ(r.has_value(), e.empty()) << body;
  return r;
}

TEST(JsonBody, ParsesAFlatObjectOfStrings) {
  auto r = parse(R"( { "name" : "ann", "text":"hi \"there\"\n\u00e9\ud83d\ude00" } )");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->at("name"), "ann");
  EXPECT_EQ(r->at("text"), "hi \"there\"\n\xC3\xA9\xF0\x9F\x98\x80");
  auto empty = parse("{}");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(JsonBody, KeepsRawUtf8) {
  auto r = parse("{\"t\":\"\xE6\x97\xA5\xE6\x9C\xAC\"}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->at("t"), "\xE6\x97\xA5\xE6\x9C\xAC");
}

TEST(JsonBody, RefusesWhatIsNotAFlatObjectOfStrings) {
  for (std::string_view bad : {
           "",
           " ",
           "[]",
           "\"x\"",
           "{",
           "}",
           "{\"a\"}",
           "{\"a\":}",
           "{\"a\":1}",
           "{\"a\":null}",
           "{\"a\":true}",
           "{\"a\":{}}",
           "{\"a\":[\"x\"]}",
           "{\"a\":\"x\",}",
           "{,}",
           "{\"a\":\"x\"} x",
           "{\"a\":\"x\"}{}",
           "{a:\"x\"}",
           "{'a':'x'}",
           "{\"a\":\"x\" \"b\":\"y\"}",
           "{\"a\":\"x\",\"a\":\"y\"}",
       }) {
    EXPECT_FALSE(parse(bad)) << bad;
  }
}

TEST(JsonBody, RefusesBadStrings) {
  for (std::string_view bad : {
           "{\"a\":\"x}",
           "{\"a\":\"\\x\"}",
           "{\"a\":\"\\u12\"}",
           "{\"a\":\"\\u12g4\"}",
           "{\"a\":\"\\ud800\"}",
           "{\"a\":\"\\udc00\"}",
           "{\"a\":\"\\ud800\\u0041\"}",
           "{\"a\":\"\\",
           "{\"a\":\"\\u",
       }) {
    EXPECT_FALSE(parse(bad)) << bad;
  }
  EXPECT_FALSE(parse(std::string("{\"a\":\"x\x01\"}")));
  EXPECT_FALSE(parse(std::string("{\"a\":\"\0\"}", 8)));
  EXPECT_FALSE(parse("{\"a\":\"\xFF\"}"));              // not UTF-8
  EXPECT_FALSE(parse("{\"a\":\"\xC0\xAF\"}"));          // overlong '/'
  EXPECT_FALSE(parse("{\"a\":\"\xED\xA0\x80\"}"));      // encoded surrogate
  EXPECT_FALSE(parse("{\"a\":\"\xF4\x90\x80\x80\"}"));  // above U+10FFFF
  EXPECT_FALSE(parse("{\"a\":\"\xE6\x97\"}"));          // truncated
}

TEST(JsonBody, ErrorsSayWhatAndWhere) {
  std::string error;
  EXPECT_FALSE(parse("{\"a\":1}", &error));
  EXPECT_EQ(error, "expected a string value at byte 5");
  EXPECT_FALSE(parse("{\"a\":\"x\",\"a\":\"y\"}", &error));
  EXPECT_NE(error.find("duplicate key 'a'"), std::string::npos);
}

TEST(JsonBody, EnforcesLimits) {
  std::string error;
  JsonBodyLimits limits{.max_keys = 2, .max_bytes = 40};
  EXPECT_TRUE(parse_flat_json_object(R"({"a":"1","b":"2"})", error, limits));
  EXPECT_FALSE(parse_flat_json_object(R"({"a":"1","b":"2","c":"3"})", error, limits));
  EXPECT_FALSE(parse_flat_json_object(std::string(41, ' '), error, limits));
  EXPECT_NE(error.find("larger than 40 bytes"), std::string::npos);
}

// Hostile input: random bytes and mutations of a valid body never crash or read out of
// bounds (run under ASan in the sanitizer build), and what parses is a flat string object.
TEST(JsonBody, SurvivesRandomMutations) {
  std::mt19937 rng(12345);
  const std::string seed = R"({"name":"ann","text":"h\u00e9llo \ud83d\ude00 \"q\""})";
  const std::string alphabet = "{}[]\":,\\u0123456789abcdefABCDEF \t\n\x01\x7f\xc3\xa9\xed\xf4";
  for (int i = 0; i < 20000; ++i) {
    std::string body = seed;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (body.size() + 1);
      switch (rng() % 3) {
        case 0:
          body.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:
          if (at < body.size()) body.erase(at, 1);
          break;
        default:
          if (at < body.size()) body[at] = alphabet[rng() % alphabet.size()];
      }
    }
    if (i % 7 == 0) body = body.substr(0, rng() % (body.size() + 1));
    std::string error;
    auto r = parse_flat_json_object(body, error);
    EXPECT_EQ(r.has_value(), error.empty());
  }
}

}  // namespace
}  // namespace kagi::http
