#include <kagi/store/detail/log_format.hpp>

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

// Damage before an intact record is skipped, not taken for the torn tail: every flipped byte
// of a middle record loses that record only, and the span is reported.
TEST(LogFormatTest, DamageInTheMiddleKeepsEveryLaterRecord) {
  std::string bytes;
  encode_record(bytes, "first");
  const size_t second_at = bytes.size();
  encode_record(bytes, "second, the damaged one");
  const size_t third_at = bytes.size();
  encode_record(bytes, "third");
  encode_record(bytes, "");
  encode_record(bytes, "fifth");
  for (size_t i = second_at; i < third_at; ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      std::vector<std::string> out;
      std::vector<Damage> damage;
      EXPECT_EQ(parse_records(bad, &out, &damage), bad.size()) << "flipped byte " << i;
      EXPECT_EQ(out, (std::vector<std::string>{"first", "third", "", "fifth"})) << i;
      ASSERT_EQ(damage.size(), 1u) << i;
      EXPECT_EQ(damage[0].offset, second_at) << i;
      EXPECT_EQ(damage[0].length, third_at - second_at) << i;
    }
  }
}

TEST(LogFormatTest, SeveralDamagedSpansAndATornTail) {
  std::string bytes;
  std::vector<size_t> starts;
  for (int i = 0; i < 10; ++i) {
    starts.push_back(bytes.size());
    encode_record(bytes, "record " + std::to_string(i));
  }
  std::string bad = bytes;
  bad[starts[2] + 9] ^= 1;     // payload of record 2
  bad[starts[5] + 1] ^= 1;     // length of record 5
  bad[starts[6] + 5] ^= 1;     // crc of record 6: one span with 5
  bad.resize(bad.size() - 2);  // record 9 torn
  std::vector<std::string> out;
  std::vector<Damage> damage;
  EXPECT_EQ(parse_records(bad, &out, &damage), starts[9]);
  EXPECT_EQ(out, (std::vector<std::string>{"record 0", "record 1", "record 3", "record 4",
                                           "record 7", "record 8"}));
  ASSERT_EQ(damage.size(), 2u);
  EXPECT_EQ(damage[0].offset, starts[2]);
  EXPECT_EQ(damage[0].length, starts[3] - starts[2]);
  EXPECT_EQ(damage[1].offset, starts[5]);
  EXPECT_EQ(damage[1].length, starts[7] - starts[5]);
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
