#include <kagi/store/status.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace kagi::store {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.message().empty());
  EXPECT_NO_THROW(s.check());
}

TEST(StatusTest, FailedNamesOperationFileStepAndCause) {
  Status s = Status::failed(std::error_code(ENOSPC, std::system_category()), "commit",
                            "boards/3.dat", "rename");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "commit boards/3.dat: rename: No space left on device");
  try {
    s.check();
    FAIL() << "check() did not throw";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), s.message());
    EXPECT_EQ(e.code(), std::errc::no_space_on_device);
  }
}

TEST(StatusTest, EscapesControlBytesInPaths) {
  Status s = Status::failed(Errc::kUnsafePath, "read", std::string_view("a\nb\0c", 5), "");
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_NE(s.message().find("a\\x0ab\\x00c"), std::string::npos) << s.message();
}

TEST(StatusTest, StoreErrorsHaveTheirOwnCategory) {
  std::error_code ec = Errc::kNotHeld;
  EXPECT_STREQ(ec.category().name(), "kagi.store");
  EXPECT_NE(ec.message().find("does not hold its lock"), std::string::npos);
}

TEST(ResultTest, ValueOrStatus) {
  Result<std::string> good(std::string("x"));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), "x");
  EXPECT_EQ(*good, "x");

  Result<std::string> bad(Status::failed(Errc::kCorrupt, "read_log", "a.log", ""));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::kCorrupt);
  EXPECT_THROW(bad.value(), StoreError);
}

// A loop over the value of a temporary Result (what a handler writes over read_log()) reads
// live data: value() on an rvalue hands out the value itself, not a reference into the
// temporary (that one dangled before the body ran: ASan reported a use after free).
TEST(ResultTest, ALoopOverTheValueOfATemporaryReadsLiveData) {
  auto records = [] {
    return Result<std::vector<std::string>>(
        std::vector<std::string>{std::string(64, 'a'), std::string(64, 'b'), std::string(64, 'c')});
  };
  std::string seen;
  for (const auto& record : records().value()) seen += record.substr(0, 1);
  EXPECT_EQ(seen, "abc");
}

}  // namespace
}  // namespace kagi::store
