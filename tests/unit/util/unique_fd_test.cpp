// UniqueFd (framework/kagi/util/unique_fd.hpp): closes exactly once, moves ownership.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <kagi/util/unique_fd.hpp>
#include <utility>

namespace {

bool is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFdTest, ClosesWhenItGoesOutOfScope) {
  int raw = -1;
  {
    kagi::util::UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = fd.get();
    ASSERT_TRUE(fd);
    EXPECT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFdTest, MoveTransfersOwnershipAndClosesTheOldTarget) {
  kagi::util::UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  kagi::util::UniqueFd b(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw_a = a.get();
  const int raw_b = b.get();
  b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(b.get(), raw_a);
  EXPECT_FALSE(is_open(raw_b));
  EXPECT_TRUE(is_open(raw_a));
}

TEST(UniqueFdTest, ReleaseGivesTheDescriptorUpWithoutClosingIt) {
  kagi::util::UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.release();
  EXPECT_FALSE(fd);
  EXPECT_TRUE(is_open(raw));
  close(raw);
}

TEST(UniqueFdTest, ResetClosesTheHeldDescriptor) {
  kagi::util::UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.get();
  fd.reset();
  EXPECT_FALSE(fd);
  EXPECT_FALSE(is_open(raw));
}

}  // namespace
