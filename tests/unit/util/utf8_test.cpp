// valid_utf8 and strip_control_chars (framework/kagi/util/utf8.cpp).
#include <kagi/util/utf8.hpp>

#include <gtest/gtest.h>

namespace kagi::util {
namespace {

using namespace std::string_literals;

TEST(ValidUtf8, AcceptsWellFormedText) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ASCII ~\x7f"));
  EXPECT_TRUE(valid_utf8("a\0b"s));
  EXPECT_TRUE(valid_utf8("\xc2\x80\xdf\xbf"));                  // U+0080, U+07FF
  EXPECT_TRUE(valid_utf8("\xe0\xa0\x80\xef\xbf\xbf"));          // U+0800, U+FFFF
  EXPECT_TRUE(valid_utf8("\xed\x9f\xbf\xee\x80\x80"));          // U+D7FF, U+E000
  EXPECT_TRUE(valid_utf8("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"));  // U+10000, U+10FFFF
  EXPECT_TRUE(valid_utf8("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x94\x91"));
}

TEST(ValidUtf8, RejectsOverlongForms) {
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));  // '/' in two bytes
  EXPECT_FALSE(valid_utf8("\xc1\xbf"));
  EXPECT_FALSE(valid_utf8("\xc0\x80"));  // "modified UTF-8" NUL
  EXPECT_FALSE(valid_utf8("\xe0\x80\xaf"));
  EXPECT_FALSE(valid_utf8("\xe0\x9f\xbf"));  // U+07FF in three bytes
  EXPECT_FALSE(valid_utf8("\xf0\x80\x80\xaf"));
  EXPECT_FALSE(valid_utf8("\xf0\x8f\xbf\xbf"));  // U+FFFF in four bytes
}

TEST(ValidUtf8, RejectsSurrogates) {
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));              // U+D800
  EXPECT_FALSE(valid_utf8("\xed\xbf\xbf"));              // U+DFFF
  EXPECT_FALSE(valid_utf8("\xed\xa0\xbd\xed\xb4\x91"));  // CESU-8 pair
}

TEST(ValidUtf8, RejectsAboveU10FFFF) {
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(valid_utf8("\xf5\x80\x80\x80"));
  EXPECT_FALSE(valid_utf8("\xf8\x88\x80\x80\x80"));
  EXPECT_FALSE(valid_utf8("\xff"));
  EXPECT_FALSE(valid_utf8("\xfe"));
}

TEST(ValidUtf8, RejectsTruncatedAndStraySequences) {
  EXPECT_FALSE(valid_utf8("\xc3"));
  EXPECT_FALSE(valid_utf8("a\xe6\x97"));
  EXPECT_FALSE(valid_utf8("\xf0\x9f\x94"));
  EXPECT_FALSE(valid_utf8("\x80"));
  EXPECT_FALSE(valid_utf8("a\xbf"));
  EXPECT_FALSE(
      valid_utf8("\xe6\x97"
                 "a"));
  EXPECT_FALSE(valid_utf8("\xc3\xc3\xa9"));
  EXPECT_FALSE(valid_utf8("\xf0\x9f\x94\x91\x91"));
}

TEST(StripControlChars, SingleLineDropsAllControls) {
  EXPECT_EQ(strip_control_chars("a\tb\r\nc\nd\0e\x1b[31m\x7f"s, false), "abcde[31m");
  EXPECT_EQ(strip_control_chars("plain", false), "plain");
  EXPECT_EQ(strip_control_chars("", false), "");
}

TEST(StripControlChars, MultilineKeepsNewlinesAndTabs) {
  EXPECT_EQ(strip_control_chars("a\tb\nc\0d\x07"s, true), "a\tb\ncd");
}

TEST(StripControlChars, NormalisesLineEndings) {
  EXPECT_EQ(strip_control_chars("1\r\n2\r3\n4\r\r\n5\n\r", true), "1\n2\n3\n4\n\n5\n\n");
}

TEST(StripControlChars, DropsC1ControlsButKeepsOtherText) {
  // U+0085 (NEL), U+0080, U+009F go; U+00A0 and U+00E9 stay.
  EXPECT_EQ(strip_control_chars("a\xc2\x85"
                                "b\xc2\x80\xc2\x9f\xc2\xa0\xc3\xa9",
                                true),
            "ab\xc2\xa0\xc3\xa9");
  EXPECT_EQ(strip_control_chars("\xe6\x97\xa5\xe6\x9c\xac", false), "\xe6\x97\xa5\xe6\x9c\xac");
}

TEST(StripControlChars, ValidInValidOutAndIdempotent) {
  const std::string in = "x\xc2\x85\r\n\xe2\x80\xa8\t\x7f\xc2";
  for (bool keep : {false, true}) {
    const std::string once = strip_control_chars(in.substr(0, in.size() - 1), keep);
    EXPECT_TRUE(valid_utf8(once));
    EXPECT_EQ(strip_control_chars(once, keep), once);
  }
  // Broken UTF-8 is not repaired: a lone lead byte passes through.
  EXPECT_EQ(strip_control_chars("\xc2", false), "\xc2");
}

}  // namespace
}  // namespace kagi::util
