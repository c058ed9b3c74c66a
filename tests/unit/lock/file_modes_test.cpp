// The lock layer's files are the owner's only: lock files are named after what they protect
// and the status registry names every request's client address and route.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <kagi/lock/lock_service.hpp>
#include "../support/file_mode.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using test_support::mode_of;

TEST(LockFileModesTest, LockDirRegistryAndLockFilesAreOwnerOnly) {
  test_support::ScopedUmask umask(022);
  test_support::TempDir tmp;
  LockOptions options;
  options.dir = tmp.path() + "/locks";
  auto service = LockService::create(options);
  auto ctx = service->context({"r1", "POST", "/t", "192.0.2.1"});
  auto guard = ctx->exclusive("test/modes");

  EXPECT_EQ(mode_of(options.dir), 0700);
  EXPECT_EQ(mode_of(options.dir + "/registry"), 0700);
  int registry_files = 0, lock_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(options.dir + "/registry")) {
    ++registry_files;
    EXPECT_EQ(mode_of(e.path()), 0600) << e.path();
  }
  for (const auto& e : std::filesystem::directory_iterator(options.dir)) {
    if (!e.is_regular_file()) continue;
    ++lock_files;
    EXPECT_EQ(mode_of(e.path()), 0600) << e.path();
  }
  EXPECT_EQ(registry_files, 1);
  EXPECT_EQ(lock_files, 1);
}

TEST(LockFileModesTest, AnExistingLockDirKeepsItsMode) {
  test_support::ScopedUmask umask(022);
  test_support::TempDir tmp;
  LockOptions options;
  options.dir = tmp.path() + "/shared";
  std::filesystem::create_directory(options.dir);
  std::filesystem::permissions(options.dir, std::filesystem::perms(0750));
  auto service = LockService::create(options);
  EXPECT_EQ(mode_of(options.dir), 0750);  // the operator's choice, not ours to change
}

}  // namespace
}  // namespace kagi::lock
