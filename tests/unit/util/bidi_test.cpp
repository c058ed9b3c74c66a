#include <gtest/gtest.h>

#include <kagi/util/utf8.hpp>

namespace kagi::util {
namespace {

TEST(StripBidiControls, RemovesEveryDirectionControl) {
  // U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069, each between two letters.
  const char* controls[] = {"\xD8\x9C",     "\xE2\x80\x8E", "\xE2\x80\x8F", "\xE2\x80\xAA",
                            "\xE2\x80\xAB", "\xE2\x80\xAC", "\xE2\x80\xAD", "\xE2\x80\xAE",
                            "\xE2\x81\xA6", "\xE2\x81\xA7", "\xE2\x81\xA8", "\xE2\x81\xA9"};
  for (const char* control : controls) {
    SCOPED_TRACE(testing::PrintToString(std::string(control)));
    EXPECT_EQ(strip_bidi_controls(std::string("a") + control + "b"), "ab");
    EXPECT_EQ(strip_bidi_controls(control), "");
  }
  // The classic spoof: "ann" + RLO + "txt.exe" reads "annexe.txt".
  EXPECT_EQ(strip_bidi_controls("ann\xE2\x80\xAEtxt.exe"), "anntxt.exe");
}

TEST(StripBidiControls, KeepsTheirNeighboursAndOtherText) {
  // Code points next to the controls (U+200D ZWJ, U+2010, U+2029, U+202F, U+2065, U+206A,
  // U+061B, U+061D), Arabic and Hebrew letters, an emoji sequence: all kept byte for byte.
  const std::string kept[] = {"\xE2\x80\x8D",
                              "\xE2\x80\x90",
                              "\xE2\x80\xA9",
                              "\xE2\x80\xAF",
                              "\xE2\x81\xA5",
                              "\xE2\x81\xAA",
                              "\xD8\x9B",
                              "\xD8\x9D",
                              "\xD8\xB3\xD9\x84\xD8\xA7\xD9\x85",
                              "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",
                              "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB",
                              "plain ascii"};
  for (const auto& s : kept) EXPECT_EQ(strip_bidi_controls(s), s);
}

TEST(StripBidiControls, TruncatedSequencesAreCopiedNotOverread) {
  EXPECT_EQ(strip_bidi_controls("\xE2\x80"), "\xE2\x80");
  EXPECT_EQ(strip_bidi_controls("\xE2"), "\xE2");
  EXPECT_EQ(strip_bidi_controls("\xD8"), "\xD8");
  EXPECT_EQ(strip_bidi_controls(""), "");
  // Valid UTF-8 stays valid.
  const std::string mixed = "x\xE2\x80\xAE\xD7\xA9\xE2\x81\xA6y\xD8\x9C";
  EXPECT_TRUE(util::valid_utf8(strip_bidi_controls(mixed)));
  EXPECT_EQ(strip_bidi_controls(mixed), "x\xD7\xA9y");
}

}  // namespace
}  // namespace kagi::util
