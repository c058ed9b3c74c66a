#include <kagi/util/password.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace kagi::util {
namespace {

TEST(Password, HashIsSaltedAndVerifies) {
  auto a = hash_password("hunter2");
  auto b = hash_password("hunter2");
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->starts_with("$y$")) << *a;
  EXPECT_NE(*a, *b) << "same password, same salt";
  EXPECT_EQ(a->find("hunter2"), std::string::npos);
  EXPECT_TRUE(verify_password("hunter2", *a));
  EXPECT_TRUE(verify_password("hunter2", *b));
  EXPECT_FALSE(verify_password("hunter3", *a));
  EXPECT_FALSE(verify_password("", *a));
}

TEST(Password, MalformedHashesNeverMatch) {
  EXPECT_FALSE(verify_password("x", ""));
  EXPECT_FALSE(verify_password("x", "x"));
  EXPECT_FALSE(verify_password("x", "$nonsense$"));
  EXPECT_FALSE(verify_password(std::string("a\0b", 3), *hash_password("a")));
}

// Entries written by Apache's `htpasswd -B` (bcrypt) verify, so the admin page can use them.
TEST(Password, VerifiesHtpasswdBcryptEntries) {
  if (std::system("command -v htpasswd >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "htpasswd (apache2-utils) not installed";
  }
  std::string file = testing::TempDir() + "/kagi-htpasswd-test";
  ASSERT_EQ(std::system(("htpasswd -cbB " + file + " admin s3cret 2>/dev/null").c_str()), 0);
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  std::string hash = line.substr(line.find(':') + 1);
  EXPECT_TRUE(hash.starts_with("$2y$")) << hash;
  EXPECT_TRUE(verify_password("s3cret", hash));
  EXPECT_FALSE(verify_password("s3cret!", hash));
  std::remove(file.c_str());
}

}  // namespace
}  // namespace kagi::util
