#include <kagi/view/page_cache.hpp>

#include <gtest/gtest.h>

namespace kagi::view {
namespace {

TEST(CachedPage, PastesTheTokenWhereverTheMarkerStood) {
  const std::string m = "MARK";
  EXPECT_EQ(CachedPage("a" + m + "b" + m + m + "c", m).with_token("tok"), "atokbtoktokc");
  EXPECT_EQ(CachedPage(m + "x" + m, m).with_token("t"), "txt");
  EXPECT_EQ(CachedPage(m + "x" + m, m).marked_places(), 2u);
  EXPECT_EQ(CachedPage("no places", m).with_token("t"), "no places");
  EXPECT_EQ(CachedPage("no places", m).marked_places(), 0u);
  EXPECT_EQ(CachedPage("", m).with_token("t"), "");
  EXPECT_EQ(CachedPage("MAR" + m + "K", m).with_token("t"), "MARtK");
}

TEST(PageCache, AMarkerIsRandomAndOnlyHexAfterItsPrefix) {
  PageCache a(4), b(4);
  EXPECT_NE(a.marker(), b.marker());
  EXPECT_GE(a.marker().size(), 32u);
  EXPECT_TRUE(pastable_token(a.marker()));
}

TEST(PageCache, APageIsFoundOnlyForTheVersionItWasRenderedFrom) {
  PageCache cache(4);
  const std::string html = "<form>" + cache.marker() + "</form>";
  EXPECT_EQ(cache.find("general/1", 7), nullptr);
  auto stored = cache.store("general/1", 7, html);
  EXPECT_EQ(stored->with_token("abc"), "<form>abc</form>");
  auto found = cache.find("general/1", 7);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->with_token("def"), "<form>def</form>");
  EXPECT_EQ(cache.find("general/1", 8), nullptr) << "the board changed";
  EXPECT_EQ(cache.find("general/2", 7), nullptr) << "another page";
}

TEST(PageCache, AnOlderStateNeverReplacesANewerOne) {
  PageCache cache(4);
  cache.store("k", 9, "new");
  cache.store("k", 3, "old");  // a reader that rendered the board before it changed, late
  EXPECT_EQ(cache.find("k", 3), nullptr);
  ASSERT_NE(cache.find("k", 9), nullptr);
  EXPECT_EQ(cache.find("k", 9)->with_token(""), "new");
  cache.store("k", 12, "newer");
  EXPECT_EQ(cache.find("k", 12)->with_token(""), "newer");
}

TEST(PageCache, KeepsAtMostItsLimitDroppingTheOldestState) {
  PageCache cache(2);
  cache.store("a", 1, "A");
  cache.store("b", 5, "B");
  cache.store("c", 3, "C");  // full: "a" (state 1) goes
  EXPECT_EQ(cache.find("a", 1), nullptr);
  EXPECT_NE(cache.find("b", 5), nullptr);
  EXPECT_NE(cache.find("c", 3), nullptr);

  PageCache off(0);
  EXPECT_EQ(off.store("a", 1, "x" + off.marker())->with_token("t"), "xt");
  EXPECT_EQ(off.find("a", 1), nullptr) << "0 pages: nothing is kept";
}

TEST(PageCache, OnlyTokensNoEscaperChangesArePastable) {
  EXPECT_TRUE(pastable_token("0123456789abcdefABCDEF_-"));
  EXPECT_TRUE(pastable_token(""));
  for (std::string_view bad : {"a b", "a\"b", "a<b", "a&b", "a'b", "a/b", "a+b", "a=b", "a%b"}) {
    EXPECT_FALSE(pastable_token(bad)) << bad;
  }
}

}  // namespace
}  // namespace kagi::view
