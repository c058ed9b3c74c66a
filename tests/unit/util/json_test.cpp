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

// Plain bytes are copied in runs: escapes at the start, the end and next to each other, and
// long runs between them, must come out as one byte at a time would.
TEST(Json, RunsAndEscapesInterleave) {
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("\"x\""), "\"\\\"x\\\"\"");
  EXPECT_EQ(json_quote("<>"), "\"\\u003c\\u003e\"");
  EXPECT_EQ(json_quote("ab\xc3\xa9"
                       "cd\xff"
                       "ef\x1f"
                       "gh"),
            "\"ab\xc3\xa9"
            "cd\\ufffdef\\u001fgh\"");
  const std::string run(1000, 'a');
  EXPECT_EQ(json_quote(run + "\n" + run), "\"" + run + "\\n" + run + "\"");
  std::string appended = "[";
  append_json_quoted(appended, "x&y");
  EXPECT_EQ(appended, "[\"x\\u0026y\"");
}

TEST(Json, RawPastesEncodedValues) {
  JsonWriter w;
  w.begin_array().raw("{\"a\":1}").raw("2").end_array();
  EXPECT_EQ(w.str(), "[{\"a\":1},2]");
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
