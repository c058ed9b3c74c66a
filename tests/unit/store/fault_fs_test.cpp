#include <kagi/store/fault_fs.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace kagi::store {
namespace {

TEST(FaultFsTest, FailsExactlyTheNthCallOfItsKind) {
  char dir_template[] = "/tmp/kagi-faultfs-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  std::string file = std::string(dir_template) + "/f";
  FaultFs fs;
  int fd = fs.open_at(AT_FDCWD, file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  fs.fail_nth(FaultFs::Op::kWrite, 3, ENOSPC);
  EXPECT_EQ(fs.write(fd, "a", 1), 1);
  EXPECT_EQ(fs.pwrite(fd, "b", 1, 1), 1);  // pwrite counts as a write
  EXPECT_EQ(fs.write(fd, "c", 1), -ENOSPC);
  EXPECT_EQ(fs.write(fd, "d", 1), 1);  // a fault fires once
  EXPECT_EQ(fs.calls(FaultFs::Op::kWrite), 4u);
  EXPECT_EQ(fs.fsync(fd), 0);  // other kinds are not affected
  fs.fail_nth(FaultFs::Op::kFsync, 1, EIO);
  EXPECT_EQ(fs.fsync(fd), -EIO);
  fs.fail_nth(FaultFs::Op::kRename, 1, EXDEV);
  fs.clear();
  EXPECT_EQ(fs.rename_at(AT_FDCWD, file.c_str(), AT_FDCWD, (file + "2").c_str()), 0);
  EXPECT_EQ(fs.close(fd), 0);
  EXPECT_EQ(fs.unlink_at(AT_FDCWD, (file + "2").c_str()), 0);
  ::rmdir(dir_template);
}

TEST(FaultFsTest, RealCallsReportNegativeErrno) {
  FaultFs fs;
  EXPECT_EQ(fs.open_at(AT_FDCWD, "/nonexistent-kagi/x", O_RDONLY, 0), -ENOENT);
}

}  // namespace
}  // namespace kagi::store
