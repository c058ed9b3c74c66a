#include <kagi/store/path.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kagi::store {
namespace {

TEST(PathTest, AcceptsPlainRelativePaths) {
  for (std::string_view p : {"a", "a.dat", "bbs/3.dat", "chat/rooms/lobby.log", "a-b_c.d/e",
                             ".hidden", "..dots", "x..y"}) {
    EXPECT_EQ(path_problem(p), nullptr) << p;
  }
}

TEST(PathTest, RefusesHostilePaths) {
  const std::string nul = std::string("a") + '\0' + "b";
  const std::string long_segment(256, 'x');
  std::string long_path;
  while (long_path.size() <= kMaxPath) long_path += "abcdefgh/";
  long_path += "x";
  for (std::string_view p :
       {std::string_view(""), std::string_view("/etc/passwd"), std::string_view(".."),
        std::string_view("../x"), std::string_view("a/../../x"), std::string_view("a/.."),
        std::string_view("./a"), std::string_view("a/./b"), std::string_view("a//b"),
        std::string_view("a/"), std::string_view(nul), std::string_view("a\nb"),
        std::string_view("a\x7f"), std::string_view(long_segment), std::string_view(long_path),
        std::string_view(".kagi-tmp-1-2"), std::string_view("a/.kagi-x")}) {
    EXPECT_NE(path_problem(p), nullptr) << "accepted: " << p;
  }
}

TEST(PathTest, NamesTheProblem) {
  EXPECT_STREQ(path_problem("a/../b"), "'..' segment");
  EXPECT_STREQ(path_problem("/a"), "absolute path");
  EXPECT_STREQ(path_problem(std::string_view("a\0b", 3)), "NUL byte in path");
}

TEST(PathTest, SplitsSegments) {
  auto s = path_segments("a/bb/c.dat");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], "a");
  EXPECT_EQ(s[1], "bb");
  EXPECT_EQ(s[2], "c.dat");
  EXPECT_EQ(path_segments("x").size(), 1u);
}

}  // namespace
}  // namespace kagi::store
