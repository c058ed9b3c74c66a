#include <kagi/store/detail/temp_cleanup.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {
namespace {

namespace fs = std::filesystem;

// The pid of a process that has exited (and been reaped): nobody holds it for a while.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

void touch(const fs::path& p) { std::ofstream(p) << "x"; }

TEST(TempCleanupTest, RemovesDeadProcessesTempFilesAtAnyDepthAndKeepsTheRest) {
  char tmpl[] = "/tmp/kagi-clean-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path root = tmpl;
  fs::create_directories(root / "a/b");
  const std::string dead = ".kagi-tmp-" + std::to_string(dead_pid()) + "-0";
  const std::string mine = ".kagi-tmp-" + std::to_string(::getpid()) + "-0";
  touch(root / dead);
  touch(root / "a/b" / dead);
  touch(root / mine);
  touch(root / "a/data.dat");

  util::UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root_fd);
  EXPECT_EQ(remove_dead_temp_files(root_fd.get(), root.string() + "/"), 2u);
  EXPECT_FALSE(fs::exists(root / dead));
  EXPECT_FALSE(fs::exists(root / "a/b" / dead));
  EXPECT_TRUE(fs::exists(root / mine));  // a live process may be mid-commit
  EXPECT_TRUE(fs::exists(root / "a/data.dat"));
  EXPECT_NE(::fcntl(root_fd.get(), F_GETFD), -1);  // the caller's descriptor stays open
  fs::remove_all(root);
}

}  // namespace
}  // namespace kagi::store::detail
