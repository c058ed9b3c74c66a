#include <kagi/store/detail/safe_path_walk.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include <kagi/store/fault_fs.hpp>
#include <kagi/store/path.hpp>

namespace kagi::store::detail {
namespace {

namespace fs = std::filesystem;

// A descriptor is open iff fcntl can ask about it.
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

class SafePathWalkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-walk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  util::UniqueFd open_root() const {
    return util::UniqueFd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }

  fs::path root_;
  FaultFs fsys_;  // no faults armed: the walk, counted
};

TEST_F(SafePathWalkTest, ABorrowedDirFdIsNotClosedAnOwnedOneIs) {
  util::UniqueFd root = open_root();
  const int owned_fd = ::dup(root.get());
  {
    DirFd borrowed = DirFd::borrowed(root.get());
    DirFd owned{util::UniqueFd(owned_fd)};
    EXPECT_EQ(borrowed.get(), root.get());
    EXPECT_EQ(owned.get(), owned_fd);
  }
  EXPECT_TRUE(is_open(root.get()));
  EXPECT_FALSE(is_open(owned_fd));
}

TEST_F(SafePathWalkTest, CreatesMissingDirectoriesAndClosesEveryOneOnTheWay) {
  util::UniqueFd root = open_root();
  const int root_fd = root.get();
  SafePathWalk walk(fsys_, std::move(root), 0700, false);
  const int probe = ::dup(root_fd);  // the lowest free number before the walk
  ::close(probe);
  {
    DirFd parent;
    std::string step;
    ASSERT_EQ(walk.open_parent(path_segments("a/b/c/f.dat"), true, &parent, &step), 0) << step;
    struct stat st {};
    ASSERT_EQ(::fstat(parent.get(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_TRUE(fs::is_directory(root_ / "a/b/c"));
  }
  // The intermediate directories and the parent are closed again: the next descriptor the
  // process gets is the one it would have got before.
  const int after = ::dup(root_fd);
  EXPECT_EQ(after, probe);
  ::close(after);
  EXPECT_TRUE(is_open(root_fd));
}

TEST_F(SafePathWalkTest, TopLevelFilesLiveInTheRoot) {
  util::UniqueFd root = open_root();
  const int root_fd = root.get();
  SafePathWalk walk(fsys_, std::move(root), 0700, false);
  DirFd parent;
  std::string step;
  ASSERT_EQ(walk.open_parent(path_segments("f.dat"), false, &parent, &step), 0);
  EXPECT_EQ(parent.get(), root_fd);
}

TEST_F(SafePathWalkTest, ASymlinkOnTheWayIsELOOPAndNamed) {
  fs::create_directory(root_ / "real");
  fs::create_directory_symlink(root_ / "real", root_ / "link");
  SafePathWalk walk(fsys_, open_root(), 0700, false);
  DirFd parent;
  std::string step;
  EXPECT_EQ(walk.open_parent(path_segments("link/f.dat"), true, &parent, &step), -ELOOP);
  EXPECT_EQ(step, "open directory link");
  util::UniqueFd fd;
  EXPECT_EQ(walk.open_readonly("link/f.dat", &fd, &step), -ELOOP);
  EXPECT_FALSE(fd);
}

TEST_F(SafePathWalkTest, OpenReadonlySaysMissingAsENOENT) {
  SafePathWalk walk(fsys_, open_root(), 0700, false);
  util::UniqueFd fd;
  std::string step;
  EXPECT_EQ(walk.open_readonly("none/f.dat", &fd, &step), -ENOENT);
  EXPECT_EQ(walk.open_readonly("f.dat", &fd, &step), -ENOENT);
  EXPECT_FALSE(fd);
}

TEST_F(SafePathWalkTest, AFailedMkdirNamesThePrefix) {
  SafePathWalk walk(fsys_, open_root(), 0700, false);
  fsys_.fail_nth(FaultFs::Op::kMkdir, 2, EACCES);
  DirFd parent;
  std::string step;
  EXPECT_EQ(walk.open_parent(path_segments("a/b/f.dat"), true, &parent, &step), -EACCES);
  EXPECT_EQ(step, "mkdir a/b");
}

}  // namespace
}  // namespace kagi::store::detail
