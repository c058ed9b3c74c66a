#include "chat/presence.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kagi::apps::chat {
namespace {

TEST(Presence, RoundTripsAndSkipsMalformedLines) {
  std::vector<Seen> seen{{"ann", 100}, {"bob b", 90}};
  EXPECT_EQ(parse_presence(encode_presence(seen)), seen);
  EXPECT_EQ(parse_presence("x\tann\n100\t\n\n5\tcat\n7x\tdog"), (std::vector<Seen>{{"cat", 5}}));
  EXPECT_EQ(encode_presence({{"a\tb", 1}, {"ok", 2}}), "2\tok\n");
}

TEST(Presence, ShowsNamesSeenInTheLastMinute) {
  std::vector<Seen> seen;
  touch(seen, "ann", 1000);
  touch(seen, "bob", 1030);
  EXPECT_EQ(present(seen, 1031), (std::vector<std::string>{"ann", "bob"}));
  EXPECT_EQ(present(seen, 1060), (std::vector<std::string>{"bob"}));  // ann: 60 s ago
  EXPECT_TRUE(present(seen, 1090).empty());
}

TEST(Presence, TouchRefreshesAndPrunes) {
  std::vector<Seen> seen;
  touch(seen, "ann", 1000);
  touch(seen, "bob", 1001);
  touch(seen, "ann", 1050);
  EXPECT_EQ(seen.size(), 2u);
  touch(seen, "cat", 1070);  // bob (1001) is out of the window and dropped
  EXPECT_EQ(seen, (std::vector<Seen>{{"ann", 1050}, {"cat", 1070}}));
}

TEST(Presence, NeedsTouchOnlyWhenMissingOrStale) {
  std::vector<Seen> seen{{"ann", 1000}};
  EXPECT_FALSE(needs_touch(seen, "ann", 1000 + kPresenceRefreshS - 1));
  EXPECT_TRUE(needs_touch(seen, "ann", 1000 + kPresenceRefreshS));
  EXPECT_TRUE(needs_touch(seen, "bob", 1000));
}

TEST(Presence, KeepsAtMostTheNewestNames) {
  std::vector<Seen> seen;
  for (size_t i = 0; i < kPresenceMaxNames + 10; ++i) {
    touch(seen, "n" + std::to_string(i), i < 10 ? 1000 : 1001);  // n0..n9 oldest
  }
  EXPECT_EQ(seen.size(), kPresenceMaxNames);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(needs_touch(seen, "n" + std::to_string(i), 1005));
  EXPECT_FALSE(needs_touch(seen, "n" + std::to_string(kPresenceMaxNames + 9), 1005));
}

// A full list of names all seen this second: the name being touched must stay in it.
TEST(Presence, TheTouchedNameSurvivesAFullListOfTheSameSecond) {
  std::vector<Seen> seen;
  for (size_t i = 0; i < kPresenceMaxNames; ++i) touch(seen, "n" + std::to_string(i), 1000);
  touch(seen, "newcomer", 1000);
  EXPECT_EQ(seen.size(), kPresenceMaxNames);
  EXPECT_EQ(last_seen(seen, "newcomer"), std::optional<int64_t>(1000));
}

TEST(Presence, MemoIsFreshForTheRefreshPeriodPerRoomAndName) {
  PresenceMemo memo;
  EXPECT_FALSE(memo.fresh("lobby", "ann", 1000));
  memo.remember("lobby", "ann", 1000);
  EXPECT_TRUE(memo.fresh("lobby", "ann", 1000));
  EXPECT_TRUE(memo.fresh("lobby", "ann", 1000 + kPresenceRefreshS - 1));
  EXPECT_FALSE(memo.fresh("lobby", "ann", 1000 + kPresenceRefreshS));
  EXPECT_FALSE(memo.fresh("other", "ann", 1000));
  EXPECT_FALSE(memo.fresh("lobby", "bob", 1000));
  // Room and name cannot run into each other ("a" + "bc" vs "ab" + "c").
  memo.remember("a", "bc", 1000);
  EXPECT_FALSE(memo.fresh("ab", "c", 1000));
}

TEST(Presence, MemoIsBounded) {
  PresenceMemo memo;
  for (size_t i = 0; i < PresenceMemo::kMaxEntries * 3; ++i) {
    memo.remember("lobby", "name" + std::to_string(i), 1000);
    ASSERT_LE(memo.size(), PresenceMemo::kMaxEntries);
  }
}

}  // namespace
}  // namespace kagi::apps::chat
