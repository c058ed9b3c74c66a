#include "bbs/post.hpp"

#include <gtest/gtest.h>

namespace kagi::apps::bbs {
namespace {

Post sample() {
  return Post{.id = 42,
              .time = 1700000000,
              .client = "00ff00ff00ff00ff",
              .password_hash = "$y$j9T$salt$hash",
              .name = "Ann\tTab",
              .subject = "line\nbreak \\ backslash",
              .body = "multi\nline\r\nbody\t\\n literal",
              .edited_at = 1700000500,
              .version = 3};
}

TEST(PostCodec, RoundTripsEveryField) {
  Post p = sample();
  std::string record = encode(p);
  EXPECT_EQ(record.find('\n'), std::string::npos) << "one line per record";
  auto back = decode(record);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, p.id);
  EXPECT_EQ(back->time, p.time);
  EXPECT_EQ(back->client, p.client);
  EXPECT_EQ(back->password_hash, p.password_hash);
  EXPECT_EQ(back->name, p.name);
  EXPECT_EQ(back->subject, p.subject);
  EXPECT_EQ(back->body, p.body);
  EXPECT_EQ(back->edited_at, p.edited_at);
  EXPECT_EQ(back->version, p.version);
}

TEST(PostCodec, ReadsPostsWrittenBeforeEditsExisted) {
  // The record format of boards written before posts could be edited.
  auto old = decode("post1\t7\t1700000000\tc\th\tAnn\tS\tbody");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->id, 7);
  EXPECT_EQ(old->body, "body");
  EXPECT_EQ(old->edited_at, 0);
  EXPECT_EQ(old->version, 1);
  EXPECT_EQ(encode(*old).substr(0, 6), "post2\t");  // rewritten in the new format
}

TEST(PostCodec, EmptyFieldsSurvive) {
  Post p;
  p.id = 1;
  auto back = decode(encode(p));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->body, "");
  EXPECT_EQ(back->password_hash, "");
}

TEST(PostCodec, RefusesForeignOrDamagedRecords) {
  std::string good = encode(sample());
  EXPECT_FALSE(decode(""));
  EXPECT_FALSE(decode("meta1\t5"));
  EXPECT_FALSE(decode(good.substr(0, good.size() / 2)));
  EXPECT_FALSE(decode(good + "\textra"));
  EXPECT_FALSE(decode("post1\tx\t1\ta\tb\tc\td\te"));
  EXPECT_FALSE(decode("post1\t0\t1\ta\tb\tc\td\te")) << "ids start at 1";
  EXPECT_FALSE(decode("post1\t1\t1\ta\tb\tc\td\tbad\\escape"));
  EXPECT_FALSE(decode("post1\t1\t1\ta\tb\tc\td\ttrailing\\"));
  EXPECT_FALSE(decode("post2\t1\t1\ta\tb\tc\td\te")) << "post2 has ten fields";
  EXPECT_FALSE(decode("post2\t1\t1\ta\tb\tc\td\te\t5\t0")) << "versions start at 1";
  EXPECT_FALSE(decode("post2\t1\t1\ta\tb\tc\td\te\t-1\t1"));
  EXPECT_FALSE(decode("post1\t1\t1\ta\tb\tc\td\te\t0\t1")) << "post1 has eight";
}

}  // namespace
}  // namespace kagi::apps::bbs
