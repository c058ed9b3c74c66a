#include <kagi/lock/detail/names.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

#include <kagi/lock/errors.hpp>

namespace kagi::lock {
namespace {

TEST(NamesTest, AcceptsHierarchicalNames) {
  for (const char* name :
       {"a", "bbs/board/3", "chat/room/lobby-1", "x_y.z", "...", "a/.b/c.", "0/1/2/3/4"}) {
    EXPECT_FALSE(validate_name(name)) << name;
  }
  EXPECT_FALSE(validate_name(std::string(kMaxNameBytes, 'a')));
}

TEST(NamesTest, RefusesHostileNamesWithAReason) {
  const std::string nul("a\0b", 3);
  const std::string big(10 * 1024, 'a');
  for (const std::string& name :
       {std::string(""), std::string(".."), std::string("a/../b"), std::string("./a"),
        std::string("/abs"), std::string("a/"), std::string("a//b"), nul, big,
        std::string(kMaxNameBytes + 1, 'a'), std::string("Board"), std::string("a b"),
        std::string("a\\b"), std::string("caf\xc3\xa9"), std::string("a\nb")}) {
    std::string why;
    std::error_code ec = validate_name(name, &why);
    EXPECT_EQ(ec, Errc::kInvalidName) << name;
    EXPECT_FALSE(why.empty()) << name;
  }
  std::string why;
  (void)validate_name("a/../b", &why);
  EXPECT_NE(why.find("'..'"), std::string::npos) << why;
  (void)validate_name(big, &why);
  EXPECT_NE(why.find("10240 bytes"), std::string::npos) << why;
  (void)validate_name(nul, &why);
  EXPECT_NE(why.find("0x00"), std::string::npos) << why;
}

TEST(NamesTest, FileNamesStayInTheDirectoryAndDoNotCollide) {
  std::set<std::string> seen;
  const std::string long_a = std::string(150, 'a');
  const std::string long_b = std::string(149, 'a') + "b";
  for (const std::string& name :
       {std::string("a/b"), std::string("a@b"), std::string("a/b/c"), std::string("ab"),
        std::string("..."), long_a, long_b, std::string(kMaxDirectFileName, 'a')}) {
    if (validate_name(name)) continue;  // "a@b" is not a valid name: skip it
    std::string file = lock_file_name(name);
    EXPECT_EQ(file.find('/'), std::string::npos) << file;
    EXPECT_NE(file, ".");
    EXPECT_NE(file, "..");
    EXPECT_LT(file.size(), 255u) << file;
    EXPECT_TRUE(seen.insert(file).second) << "collision on " << file;
  }
  EXPECT_EQ(lock_file_name("bbs/board/3"), "bbs@board@3.lock");
  // Long names keep a readable prefix and carry a hash; short names never contain '#'.
  EXPECT_EQ(lock_file_name(long_a).substr(0, 10), "aaaaaaaaaa");
  EXPECT_NE(lock_file_name(long_a).find('#'), std::string::npos);
  EXPECT_EQ(lock_file_name(std::string(kMaxDirectFileName, 'a')).find('#'), std::string::npos);
}

TEST(NamesTest, PrefixIsTheNameWithoutItsLastSegment) {
  EXPECT_EQ(name_prefix("bbs/board/3"), "bbs/board");
  EXPECT_EQ(name_prefix("bbs/board"), "bbs");
  EXPECT_EQ(name_prefix("global"), "global");
}

TEST(NamesTest, HashIsStable) {
  // FNV-1a test vector: the file names must not change between builds.
  EXPECT_EQ(name_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(name_hash("ab"), name_hash("ba"));
}

}  // namespace
}  // namespace kagi::lock
