// The rooms folder the watcher creates is the owner's only: it holds what users wrote.
#include <gtest/gtest.h>

#include <string>

#include "../support/file_mode.hpp"
#include "../support/temp_dir.hpp"
#include "chat/watcher.hpp"

namespace kagi::apps::chat {
namespace {

using test_support::mode_of;

TEST(WatcherModeTest, CreatesItsFoldersOwnerOnly) {
  test_support::ScopedUmask umask(022);
  test_support::TempDir tmp;
  ParkingLot lot;
  std::error_code ec;
  RoomWatcher watcher(
      tmp.path() + "/chat/rooms", lot, [](const std::string&) {}, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(mode_of(tmp.path() + "/chat"), 0700);
  EXPECT_EQ(mode_of(tmp.path() + "/chat/rooms"), 0700);
}

}  // namespace
}  // namespace kagi::apps::chat
