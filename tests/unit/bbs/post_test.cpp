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
              .body = "multi\nline\r\nbody\t\\n literal"};
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
}

}  // namespace
}  // namespace kagi::apps::bbs
