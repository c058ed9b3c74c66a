#include "chat/flood.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kagi::apps::chat {
namespace {

constexpr int64_t kT0 = 1'763'900'000'000;            // unix ms
const SayLimit kLimit{.per_minute = 30, .burst = 3};  // one token every 2 s

// Says `n` times at `now` against `file`, keeping the file as a handler would commit it.
int allowed_of(std::string& file, std::string_view tag, int64_t now, int n) {
  int allowed = 0;
  for (int i = 0; i < n; ++i) {
    SayVerdict v = take_say(file, tag, now, kLimit);
    if (v.allowed) {
      ++allowed;
      file = v.new_text;
    }
  }
  return allowed;
}

TEST(SayFlood, ABurstThenOneTokenPerInterval) {
  std::string file;
  EXPECT_EQ(allowed_of(file, "aaaa", kT0, 10), 3);  // the burst, nothing more
  SayVerdict refused = take_say(file, "aaaa", kT0, kLimit);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_s, 2);
  EXPECT_TRUE(refused.new_text.empty());
  // One token back after 2 s, not before.
  EXPECT_EQ(allowed_of(file, "aaaa", kT0 + 1999, 1), 0);
  EXPECT_EQ(allowed_of(file, "aaaa", kT0 + 2000, 5), 1);
  // A minute of saying as fast as possible lets through the burst plus per_minute.
  file.clear();
  int total = 0;
  for (int64_t ms = 0; ms < 60000; ms += 10) total += allowed_of(file, "aaaa", kT0 + ms, 1);
  EXPECT_EQ(total, 3 + 29);  // the 30th interval ends at 60 s
}

TEST(SayFlood, RetryAfterIsWholeSecondsAndAtLeastOne) {
  std::string file;
  allowed_of(file, "aaaa", kT0, 3);
  EXPECT_EQ(take_say(file, "aaaa", kT0 + 1, kLimit).retry_after_s, 2);     // 1999 ms
  EXPECT_EQ(take_say(file, "aaaa", kT0 + 1999, kLimit).retry_after_s, 1);  // 1 ms
  const SayLimit fast{.per_minute = 60000, .burst = 1};                    // 1 ms per token
  SayVerdict first = take_say("", "b", kT0, fast);
  ASSERT_TRUE(first.allowed);
  EXPECT_EQ(take_say(first.new_text, "b", kT0, fast).retry_after_s, 1);  // 1 ms: 1 s
}

TEST(SayFlood, ClientsDoNotShareABucket) {
  std::string file;
  EXPECT_EQ(allowed_of(file, "aaaa", kT0, 10), 3);
  EXPECT_EQ(allowed_of(file, "bbbb", kT0, 10), 3);
  EXPECT_EQ(allowed_of(file, "aaaa", kT0, 1), 0);
  EXPECT_NE(file.find("aaaa "), std::string::npos);
  EXPECT_NE(file.find("bbbb "), std::string::npos);
}

TEST(SayFlood, FullBucketsLeaveTheFile) {
  std::string file;
  allowed_of(file, "aaaa", kT0, 3);
  // Once aaaa's bucket is full again (6 s later), another client's say drops its line.
  SayVerdict v = take_say(file, "bbbb", kT0 + 6000, kLimit);
  ASSERT_TRUE(v.allowed);
  EXPECT_EQ(v.new_text, "bbbb " + std::to_string(kT0 + 8000) + "\n");
}

TEST(SayFlood, MalformedLinesAreDroppedNotTrusted) {
  const std::string junk = "no-number\n aaaa 5\naaaa 12x\naaaa\n\n" + std::string("\0", 1);
  SayVerdict v = take_say(junk, "aaaa", kT0, kLimit);
  ASSERT_TRUE(v.allowed);
  EXPECT_EQ(v.new_text, "aaaa " + std::to_string(kT0 + 2000) + "\n");
}

TEST(SayFlood, AClockThatWentBackCostsAtMostOneFullBucket) {
  // A line far in the future (written before the clock was set back an hour).
  const std::string file = "aaaa " + std::to_string(kT0 + 3'600'000) + "\n";
  SayVerdict v = take_say(file, "aaaa", kT0, kLimit);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_s, 2);  // one interval, not an hour
}

TEST(SayFlood, TagsAreStableHexKeyedAndSpreadOverTheBuckets) {
  const util::Secret key = util::Secret::from_bytes(std::string(32, 'k'));
  const util::Secret other = util::Secret::from_bytes(std::string(32, 'o'));
  const auto client_tag = [&](std::string_view address) { return chat::client_tag(address, key); };
  EXPECT_EQ(client_tag("127.0.0.1"), client_tag("127.0.0.1"));
  EXPECT_NE(client_tag("127.0.0.1"), client_tag("127.0.0.2"));
  EXPECT_NE(client_tag("127.0.0.1"), chat::client_tag("127.0.0.1", other));
  EXPECT_EQ(client_tag("").size(), 16u);
  EXPECT_EQ(client_tag("::1").find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(flood_lock_name("0001ffff"), "chat/flood/01");
  EXPECT_EQ(flood_path("0001ffff"), "chat/flood/01.txt");
  std::set<std::string> buckets;
  for (int i = 0; i < 1000; ++i)
    buckets.insert(flood_path(client_tag("10.0.0." + std::to_string(i))));
  EXPECT_GT(buckets.size(), 50u);  // of kTagBuckets = 64
  for (const auto& b : buckets) EXPECT_TRUE(b.starts_with("chat/flood/")) << b;
}

}  // namespace
}  // namespace kagi::apps::chat
