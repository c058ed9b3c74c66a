#include <kagi/util/secret.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace kagi::util {
namespace {

class SecretTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kagi-secret-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path() const { return (dir_ / "secret.key").string(); }

  std::filesystem::path dir_;
};

TEST_F(SecretTest, MadeOnceAsPrivateFileAndReadAgain) {
  const Secret first = Secret::load_or_create(path());
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const Secret again = Secret::load_or_create(path());
  EXPECT_EQ(first.tag("t", "m", 16), again.tag("t", "m", 16)) << "the same secret";
  // Nothing left behind but the secret itself.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
}

TEST_F(SecretTest, EachSiteGetsItsOwnSecret) {
  const Secret a = Secret::load_or_create(path());
  const Secret b = Secret::load_or_create((dir_ / "other.key").string());
  EXPECT_NE(a.tag("t", "m", 16), b.tag("t", "m", 16));
}

TEST_F(SecretTest, RefusesAFileOthersCanRead) {
  Secret::load_or_create(path());
  ::chmod(path().c_str(), 0644);
  try {
    Secret::load_or_create(path());
    FAIL() << "a world-readable secret was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
}

TEST_F(SecretTest, RefusesAMalformedFile) {
  {
    std::ofstream out(path());
    out << "not hex\n";
  }
  ::chmod(path().c_str(), 0600);
  EXPECT_THROW(Secret::load_or_create(path()), std::runtime_error);
}

TEST_F(SecretTest, SaysWhatIsWrongWhenTheFolderIsMissing) {
  try {
    Secret::load_or_create((dir_ / "no" / "such" / "secret.key").string());
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such"), std::string::npos) << e.what();
  }
}

TEST(SecretTag, DependsOnKeyDomainAndMessage) {
  const Secret k1 = Secret::from_bytes(std::string(32, '1'));
  const Secret k2 = Secret::from_bytes(std::string(32, '2'));
  EXPECT_EQ(k1.tag("d", "m", 8).size(), 16u);
  EXPECT_NE(k1.tag("d", "m", 8), k2.tag("d", "m", 8));
  EXPECT_NE(k1.tag("d", "m", 8), k1.tag("e", "m", 8));
  EXPECT_NE(k1.tag("d", "m", 8), k1.tag("d", "n", 8));
  // The domain is separated from the message: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(k1.tag("ab", "c", 8), k1.tag("a", "bc", 8));
  EXPECT_THROW(Secret::from_bytes("short"), std::invalid_argument);
}

}  // namespace
}  // namespace kagi::util
