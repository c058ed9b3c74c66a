// percent_decode / percent_encode (framework/kagi/http/percent.cpp).
#include <kagi/http/form.hpp>

#include <gtest/gtest.h>

namespace kagi::http {
namespace {

using namespace std::string_literals;

TEST(PercentDecode, PlainTextIsUnchanged) {
  EXPECT_EQ(percent_decode("hello", false), "hello");
  EXPECT_EQ(percent_decode("", false), "");
}

TEST(PercentDecode, DecodesEscapesInEitherCase) {
  EXPECT_EQ(percent_decode("a%20b", false), "a b");
  EXPECT_EQ(percent_decode("%e3%81%82%E3%81%82", false), "\xe3\x81\x82\xe3\x81\x82");
  EXPECT_EQ(percent_decode("%25", false), "%");
  EXPECT_EQ(percent_decode("%2B", true), "+");
}

TEST(PercentDecode, PlusIsSpaceOnlyWhenAsked) {
  EXPECT_EQ(percent_decode("a+b", true), "a b");
  EXPECT_EQ(percent_decode("a+b", false), "a+b");
}

TEST(PercentDecode, NulAndControlBytesDecodeAsBytes) {
  // Decoding is byte-exact; rejecting NUL is the application's input validation.
  EXPECT_EQ(percent_decode("a%00b", false), "a\0b"s);
  EXPECT_EQ(percent_decode("%0D%0A", false), "\r\n");
}

TEST(PercentDecode, RejectsBadEscapes) {
  EXPECT_EQ(percent_decode("%", false), std::nullopt);
  EXPECT_EQ(percent_decode("%2", false), std::nullopt);
  EXPECT_EQ(percent_decode("abc%", false), std::nullopt);
  EXPECT_EQ(percent_decode("abc%4", false), std::nullopt);
  EXPECT_EQ(percent_decode("%zz", false), std::nullopt);
  EXPECT_EQ(percent_decode("%g0", false), std::nullopt);
  EXPECT_EQ(percent_decode("%0g", false), std::nullopt);
  EXPECT_EQ(percent_decode("% 20", false), std::nullopt);
  EXPECT_EQ(percent_decode("%%41", false), std::nullopt);
}

TEST(PercentDecode, DoesNotDecodeTwice) { EXPECT_EQ(percent_decode("%2541", false), "%41"); }

TEST(PercentEncode, KeepsUnreservedOnly) {
  EXPECT_EQ(percent_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percent_encode("a b+c&d=e/f?"), "a%20b%2Bc%26d%3De%2Ff%3F");
  EXPECT_EQ(percent_encode("\xe3\x81\x82"), "%E3%81%82");
  EXPECT_EQ(percent_encode("\0\xff"s), "%00%FF");
  EXPECT_EQ(percent_encode(""), "");
}

TEST(PercentEncode, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(percent_decode(percent_encode(all), true), all);
  EXPECT_EQ(percent_decode(percent_encode(all), false), all);
}

}  // namespace
}  // namespace kagi::http
