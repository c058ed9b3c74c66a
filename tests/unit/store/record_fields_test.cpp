#include <kagi/store/record_fields.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kagi::store {
namespace {

TEST(RecordFields, EscapesBackslashTabAndNewlineOnly) {
  EXPECT_EQ(join_fields({"a", "", "b c"}), "a\t\tb c");
  EXPECT_EQ(join_fields({"\\", "\t", "\n"}), "\\\\\t\\t\t\\n");
  EXPECT_EQ(join_fields({"x\\ty\n\nz\t"}), "x\\\\ty\\n\\nz\\t");
  EXPECT_EQ(join_fields({std::string("\r\0\x7f", 3)}), std::string("\r\0\x7f", 3));
}

// Every byte, alone and beside each escaped one, at a field's start, middle and end.
TEST(RecordFields, EveryByteComesBackAsItWent) {
  for (int b = 0; b < 256; ++b) {
    const std::string c(1, static_cast<char>(b));
    for (const std::string& field : {c, c + c, "<" + c + "\\" + c + "\t\n" + c + ">", "\\" + c}) {
      const std::string record = join_fields({"tag", field, "", field});
      EXPECT_EQ(record.find('\n'), std::string::npos) << "byte " << b;
      const auto fields = split_fields(record, 4);
      ASSERT_TRUE(fields) << "byte " << b;
      EXPECT_EQ((*fields)[1], field) << "byte " << b;
      EXPECT_EQ((*fields)[2], "");
      EXPECT_EQ((*fields)[3], field) << "byte " << b;
    }
  }
}

TEST(RecordFields, AnotherCountOrABadEscapeIsRefused) {
  EXPECT_FALSE(split_fields("a\tb", 3));
  EXPECT_FALSE(split_fields("a\tb\tc", 2));
  EXPECT_FALSE(split_fields("a\\x\tb", 2)) << "unknown escape";
  EXPECT_FALSE(split_fields("a\tb\\", 2)) << "cut escape";
}

}  // namespace
}  // namespace kagi::store
