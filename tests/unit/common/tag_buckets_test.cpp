#include "common/tag_buckets.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kagi::apps {
namespace {

TEST(TagBuckets, NamesComeFromTheTagsFirstHexDigits) {
  EXPECT_EQ(tag_bucket("0001ffff"), "01");
  EXPECT_EQ(tag_bucket("0040ffff"), "00");  // 0x40 = 64 wraps to bucket 0
  EXPECT_EQ(tag_bucket(""), "00");
  EXPECT_EQ(tag_bucket_lock("bbs/flood", "0003"), "bbs/flood/03");
  EXPECT_EQ(tag_bucket_path("chat/flood", "003f"), "chat/flood/63.txt");
  std::set<std::string> seen;
  for (unsigned i = 0; i < 4096; ++i) {
    char tag[8];
    std::snprintf(tag, sizeof tag, "%04x", i);
    seen.insert(tag_bucket(tag));
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kTagBuckets));
}

TEST(TagBuckets, LinesRoundTripAndDamagedOnesAreSkipped) {
  std::string text;
  append_tag_line(text, "aaaa", 17);
  append_tag_line(text, "bbbb", -3);
  text += "torn-line-without-number\n cccc 5\ndddd 12x\neeee 9";  // the last one unterminated
  std::vector<std::pair<std::string, int64_t>> got;
  for_each_tag_line(text, [&](std::string_view tag, int64_t n) { got.emplace_back(tag, n); });
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"aaaa", 17}, {"bbbb", -3}, {"eeee", 9}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace kagi::apps
