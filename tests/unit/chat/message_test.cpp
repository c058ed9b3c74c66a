#include "chat/message.hpp"

#include <gtest/gtest.h>

namespace kagi::apps::chat {
namespace {

TEST(Message, RoundTripsAnyText) {
  Message m{.id = 7, .time = 1700000000, .name = "ann\\x", .text = "tab\there\nnew \\n line"};
  auto back = decode(encode(m));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, m);
}

TEST(Message, RecordIsOneLine) {
  std::string r = encode({.id = 1, .time = 2, .name = "a\nb", .text = "c\td"});
  EXPECT_EQ(r.find('\n'), std::string::npos);
  EXPECT_EQ(r, "m1\t1\t2\ta\\nb\tc\\td");
}

TEST(Message, RefusesForeignAndDamagedRecords) {
  EXPECT_FALSE(decode(""));
  EXPECT_FALSE(decode("meta1\t5"));
  EXPECT_FALSE(decode("m2\t1\t2\ta\tb"));
  EXPECT_FALSE(decode("m1\tx\t2\ta\tb"));
  EXPECT_FALSE(decode("m1\t0\t2\ta\tb"));     // ids start at 1
  EXPECT_FALSE(decode("m1\t1\t2\ta"));        // a field missing
  EXPECT_FALSE(decode("m1\t1\t2\ta\tb\tc"));  // a field too many
  EXPECT_FALSE(decode("m1\t1\t2\ta\\q\tb"));  // unknown escape
  EXPECT_FALSE(decode("m1\t1\t2\ta\tb\\"));   // dangling escape
  EXPECT_TRUE(decode("m1\t1\t2\t\t"));        // empty name and text decode (input checks refuse)
}

TEST(Message, NewerThanIsAscendingAfterSince) {
  std::vector<Message> ms(3);
  ms[0].id = 3;
  ms[1].id = 4;
  ms[2].id = 6;
  auto r = newer_than(ms, 3);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, 4);
  EXPECT_EQ(r[1].id, 6);
  EXPECT_EQ(newer_than(ms, 0).size(), 3u);
  EXPECT_TRUE(newer_than(ms, 6).empty());
  EXPECT_TRUE(newer_than(ms, 99).empty());
}

TEST(Message, JsonShape) {
  std::vector<Message> ms{{.id = 1, .time = 5, .name = "a\"b", .text = "<x>"}};
  EXPECT_EQ(messages_json(ms, 1),
            R"({"messages":[{"id":1,"name":"a\"b","text":"\u003cx\u003e","time":5}],"last":1})");
  EXPECT_EQ(messages_json({}, 9), R"({"messages":[],"last":9})");
}

// A decoded message carries its JSON object, made once; the answer pastes it and must be
// byte for byte what encoding it again gives.
TEST(Message, DecodedMessagesAnswerTheSameJson) {
  const Message built{.id = 7, .time = 9, .name = "n\tame <&>", .text = "h\xc3\xa9\n\"\\ \xff"};
  std::optional<Message> decoded = decode(encode(built));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, built);
  EXPECT_FALSE(decoded->json.empty());
  EXPECT_TRUE(built.json.empty());
  EXPECT_EQ(messages_json(std::vector<Message>{*decoded}, 7),
            messages_json(std::vector<Message>{built}, 7));
  EXPECT_EQ(messages_json(std::vector<Message>{*decoded}, 7),
            R"({"messages":[{"id":7,"name":"n\tame \u003c\u0026\u003e",)"
            "\"text\":\"h\xc3\xa9\\n\\\"\\\\ \\ufffd\",\"time\":9}],\"last\":7}");
}

}  // namespace
}  // namespace kagi::apps::chat
