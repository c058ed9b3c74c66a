// LiveFile (framework/kagi/lock/live_file.hpp): a live owner's file is seen alive, a dead
// owner's (killed, no destructor run) is removed with its companions by the next reader.
#include <kagi/lock/live_file.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using test_support::TempDir;
namespace fs = std::filesystem;

TEST(LiveFileTest, AnOwnersFileIsAliveAndGoneWhenItIsDestroyed) {
  TempDir dir;
  std::error_code ec;
  auto file = LiveFile::create(
      dir.path(), ".reg", [](int fd) { return ::ftruncate(fd, 64) == 0; }, ec);
  ASSERT_TRUE(file) << ec.message();
  EXPECT_EQ(fs::file_size(file->path()), 64u) << "prepare() ran before the file was named";
  const auto names = live_file_names(dir.path(), ".reg");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(dir.path() + "/" + names[0], file->path());
  EXPECT_TRUE(names[0].starts_with(std::to_string(::getpid()) + "-"));

  util::UniqueFd fd;
  EXPECT_EQ(open_if_alive(file->path(), O_RDONLY, fd), Liveness::kAlive);
  EXPECT_TRUE(fd);
  const std::string path = file->path();
  file.reset();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(open_if_alive(path, O_RDONLY, fd), Liveness::kUnreadable);
}

TEST(LiveFileTest, AKilledOwnersFileIsRemovedWithItsCompanionsByTheNextReader) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::error_code ec;
    auto file = LiveFile::create(dir.path(), ".live", nullptr, ec);
    if (!file) ::_exit(1);
    std::ofstream(dir.path() + "/" + file->stem() + ".stats") << "totals";
    ::kill(::getpid(), SIGKILL);  // no destructor runs: only the kernel drops the lock
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  const auto names = live_file_names(dir.path(), ".live");
  ASSERT_EQ(names.size(), 1u) << "the killed owner left its file";
  const std::string live = dir.path() + "/" + names[0];
  const std::string stats = live.substr(0, live.size() - 5) + ".stats";
  ASSERT_TRUE(fs::exists(stats));
  util::UniqueFd fd;
  EXPECT_EQ(open_if_alive(live, O_RDONLY, fd, {".stats"}), Liveness::kDead);
  EXPECT_FALSE(fd);
  EXPECT_FALSE(fs::exists(live));
  EXPECT_FALSE(fs::exists(stats)) << "the companion went with it";
}

TEST(LiveFileTest, HalfMadeFilesAndOtherExtensionsAreNotListed) {
  TempDir dir;
  std::ofstream(dir.path() + "/tmp-1-2.reg") << "";
  std::ofstream(dir.path() + "/1-2.stats") << "";
  std::ofstream(dir.path() + "/.reg") << "";
  EXPECT_TRUE(live_file_names(dir.path(), ".reg").empty());
  EXPECT_TRUE(live_file_names(dir.path() + "/missing", ".reg").empty());
}

TEST(LiveFileTest, AFailedPrepareLeavesNoFile) {
  TempDir dir;
  std::error_code ec;
  auto file = LiveFile::create(
      dir.path(), ".reg",
      [](int) {
        errno = ENOSPC;
        return false;
      },
      ec);
  EXPECT_FALSE(file);
  EXPECT_EQ(ec, std::errc::no_space_on_device);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace kagi::lock
