#include <kagi/util/json.hpp>

#include <gtest/gtest.h>

namespace kagi::util {
namespace {

TEST(Json, QuotesAndEscapes) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("l1\nl2\t\r"), "\"l1\\nl2\\t\\r\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(json_quote(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(Json, SafeInsideScriptBlocks) {
  std::string q = json_quote("</script><b>&");
  EXPECT_EQ(q.find('<'), std::string::npos);
  EXPECT_EQ(q.find('>'), std::string::npos);
  EXPECT_EQ(q.find('&'), std::string::npos);
}

TEST(Json, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(json_quote("h\xc3\xa9 \xe9\x8d\xb5 \xf0\x9f\x94\x91"),
            "\"h\xc3\xa9 \xe9\x8d\xb5 \xf0\x9f\x94\x91\"");
  EXPECT_EQ(json_quote("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json_quote("\xc3"), "\"\\ufffd\"") << "truncated sequence";
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"") << "overlong";
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"") << "surrogate";
}

TEST(Json, WriterBuildsNestedValues) {
  JsonWriter w;
  w.begin_object()
      .key("messages")
      .begin_array()
      .begin_object()
      .key("id")
      .value(1)
      .key("text")
      .value("hi")
      .end_object()
      .begin_object()
      .key("id")
      .value(int64_t{2})
      .key("ok")
      .value(true)
      .key("none")
      .null()
      .end_object()
      .end_array()
      .key("last")
      .value(uint64_t{2})
      .key("ratio")
      .value(0.5)
      .end_object();
  EXPECT_EQ(w.str(),
            "{\"messages\":[{\"id\":1,\"text\":\"hi\"},{\"id\":2,\"ok\":true,\"none\":null}],"
            "\"last\":2,\"ratio\":0.5}");
}

}  // namespace
}  // namespace kagi::util
