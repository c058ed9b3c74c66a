#include "store/detail/log_format.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kagi::store::detail {
namespace {

TEST(LogFormatTest, RoundTrip) {
  std::string bytes;
  std::vector<std::string> in = {"", "a", std::string(1000, 'x'), std::string("\0\n\r", 3)};
  for (const auto& r : in) encode_record(bytes, r);
  std::vector<std::string> out;
  EXPECT_EQ(parse_records(bytes, &out), bytes.size());
  EXPECT_EQ(out, in);
}

TEST(LogFormatTest, EveryTruncationOfTheLastRecordDropsExactlyIt) {
  std::string bytes;
  encode_record(bytes, "first");
  const size_t first_end = bytes.size();
  encode_record(bytes, "second record");
  for (size_t cut = first_end; cut < bytes.size(); ++cut) {
    std::vector<std::string> out;
    EXPECT_EQ(parse_records(std::string_view(bytes).substr(0, cut), &out), first_end) << cut;
    ASSERT_EQ(out.size(), 1u) << cut;
    EXPECT_EQ(out[0], "first");
  }
}

TEST(LogFormatTest, CorruptionStopsParsing) {
  std::string bytes;
  encode_record(bytes, "first");
  const size_t first_end = bytes.size();
  encode_record(bytes, "second");
  for (size_t i = first_end; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    EXPECT_EQ(parse_records(bad, nullptr), first_end) << "flipped byte " << i;
  }
}

TEST(LogFormatTest, Header) {
  EXPECT_EQ(check_header("KAGILOG1rest"), Header::kValid);
  EXPECT_EQ(check_header(""), Header::kPartial);
  EXPECT_EQ(check_header("KAGI"), Header::kPartial);
  EXPECT_EQ(check_header("hello world"), Header::kForeign);
  EXPECT_EQ(check_header("KX"), Header::kForeign);
}

}  // namespace
}  // namespace kagi::store::detail
