#include <kagi/lock/registry.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using test_support::TempDir;

// A registry of `slots` slots under `dir`; null (with the reason reported) if it cannot be made.
std::unique_ptr<Registry> create_registry(const TempDir& dir, size_t slots) {
  std::error_code ec;
  auto reg = Registry::create(dir.path(), slots, ec);
  EXPECT_TRUE(reg) << ec.message();
  return reg;
}

TEST(RegistryTest, PublishesHeldAndWaitingLocks) {
  TempDir dir;
  auto reg = create_registry(dir, 8);
  ASSERT_TRUE(reg);
  HolderInfo who{
      .request_id = "r1", .method = "POST", .path = "/bbs/3/post", .client_address = "192.0.2.7"};
  int waiting = reg->publish(who, "bbs/board/3", Mode::kExclusive);
  int held = reg->publish(who, "bbs/flood/x", Mode::kShared);
  reg->mark_held(held);
  // A lock granted at once is published as held in one step.
  int granted =
      reg->publish(who, "bbs/flood/y", Mode::kShared, Clock::now(), Registry::State::kHeld);
  RegistrySnapshot snap = Registry::read(dir.path());
  EXPECT_EQ(snap.processes, 1u);
  ASSERT_EQ(snap.entries.size(), 3u);
  for (const RegistryEntry& e : snap.entries) {
    EXPECT_EQ(e.request_id, "r1");
    EXPECT_EQ(e.method, "POST");
    EXPECT_EQ(e.path, "/bbs/3/post");
    EXPECT_EQ(e.client_address, "192.0.2.7");
    EXPECT_EQ(e.pid, ::getpid());
    EXPECT_GT(e.thread, 0);
    if (e.name == "bbs/board/3") {
      EXPECT_TRUE(e.waiting);
      EXPECT_EQ(e.mode, Mode::kExclusive);
    } else {
      EXPECT_TRUE(e.name == "bbs/flood/x" || e.name == "bbs/flood/y") << e.name;
      EXPECT_FALSE(e.waiting);
      EXPECT_EQ(e.mode, Mode::kShared);
    }
  }
  reg->clear(waiting);
  reg->clear(held);
  reg->clear(granted);
  EXPECT_TRUE(Registry::read(dir.path()).entries.empty());
}

TEST(RegistryTest, OverflowIsCountedNotFatal) {
  TempDir dir;
  auto reg = create_registry(dir, 2);
  ASSERT_TRUE(reg);
  HolderInfo who;
  int a = reg->publish(who, "a", Mode::kShared);
  int b = reg->publish(who, "b", Mode::kShared);
  EXPECT_EQ(reg->publish(who, "c", Mode::kShared), -1);
  EXPECT_EQ(reg->overflows(), 1u);
  reg->clear(a);
  EXPECT_GE(reg->publish(who, "d", Mode::kShared), 0);
  reg->clear(b);
}

TEST(RegistryTest, EverySlotIsUsableAndNoMore) {
  // Slot counts around the 64-slot words of the in-use bitmap.
  for (size_t slots : {1u, 63u, 64u, 65u, 130u}) {
    TempDir dir;
    auto reg = create_registry(dir, slots);
    ASSERT_TRUE(reg);
    HolderInfo who;
    std::vector<int> taken;
    for (size_t i = 0; i < slots; ++i) {
      const int slot = reg->publish(who, "n/" + std::to_string(i), Mode::kShared);
      ASSERT_GE(slot, 0) << slots << " slots, publish " << i;
      ASSERT_LT(static_cast<size_t>(slot), slots);
      taken.push_back(slot);
    }
    std::sort(taken.begin(), taken.end());
    EXPECT_EQ(std::adjacent_find(taken.begin(), taken.end()), taken.end()) << "a slot given twice";
    EXPECT_EQ(reg->publish(who, "one-too-many", Mode::kShared), -1) << slots << " slots";
    EXPECT_EQ(reg->overflows(), 1u);
    EXPECT_EQ(Registry::read(dir.path()).entries.size(), slots);
    for (int slot : taken) reg->clear(slot);
    EXPECT_TRUE(Registry::read(dir.path()).entries.empty());
  }
}

TEST(RegistryTest, AReusedSlotShowsOnlyTheNewRecord) {
  // Only the words up to each field's NUL are written: a short record in a slot that held a
  // long one must not show the old record's tail.
  TempDir dir;
  auto reg = create_registry(dir, 1);
  ASSERT_TRUE(reg);
  HolderInfo long_who{.request_id = std::string(39, 'r'),
                      .method = "PROPPATCH",
                      .path = "/" + std::string(150, 'p'),
                      .client_address = std::string(63, 'c')};
  reg->clear(reg->publish(long_who, std::string(200, 'n'), Mode::kExclusive));
  HolderInfo short_who{.request_id = "r", .method = "GET", .path = "/", .client_address = "c"};
  const int slot = reg->publish(short_who, "n", Mode::kShared);
  ASSERT_EQ(slot, 0);
  RegistrySnapshot snap = Registry::read(dir.path());
  ASSERT_EQ(snap.entries.size(), 1u);
  const RegistryEntry& e = snap.entries[0];
  EXPECT_EQ(e.name, "n");
  EXPECT_EQ(e.request_id, "r");
  EXPECT_EQ(e.method, "GET");
  EXPECT_EQ(e.path, "/");
  EXPECT_EQ(e.client_address, "c");
  EXPECT_EQ(e.mode, Mode::kShared);
  reg->clear(slot);
}

TEST(RegistryTest, ThreadsNeverShareASlot) {
  TempDir dir;
  constexpr size_t kSlots = 70;
  auto reg = create_registry(dir, kSlots);
  ASSERT_TRUE(reg);
  std::vector<std::atomic<int>> owner(kSlots);
  std::atomic<int> shared_slots{0};
  std::vector<std::thread> threads;
  for (int t = 1; t <= 8; ++t) {
    threads.emplace_back([&, t] {
      HolderInfo who;
      for (int i = 0; i < 5000; ++i) {
        const int slot = reg->publish(who, "t", Mode::kShared);
        if (slot < 0) continue;
        if (owner[static_cast<size_t>(slot)].exchange(t) != 0) shared_slots.fetch_add(1);
        owner[static_cast<size_t>(slot)].store(0);
        reg->clear(slot);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(shared_slots.load(), 0);
  EXPECT_EQ(reg->overflows(), 0u);  // 8 threads hold at most 8 of the 70 slots
  EXPECT_TRUE(Registry::read(dir.path()).entries.empty());
}

TEST(RegistryTest, FilesOfDeadOwnersAreRemoved) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/registry");
  // A registry file nobody holds flock on: its owner is gone.
  const std::string stale = dir.path() + "/registry/99999-1.reg";
  int fd = ::open(stale.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  ::close(fd);
  auto live = create_registry(dir, 4);
  ASSERT_TRUE(live);
  RegistrySnapshot snap = Registry::read(dir.path());
  EXPECT_EQ(snap.dead_removed, 1u);
  EXPECT_EQ(snap.processes, 1u);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live->path()));
  const std::string path = live->path();
  live.reset();
  EXPECT_FALSE(std::filesystem::exists(path));  // the owner removes its file on exit
}

// Readers never see a torn record while a writer keeps rewriting the slot.
TEST(RegistryTest, ReadersSeeWholeRecords) {
  TempDir dir;
  auto reg = create_registry(dir, 1);
  ASSERT_TRUE(reg);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      std::string id(30, static_cast<char>('a' + i % 26));
      HolderInfo who{.request_id = id, .method = "GET", .path = "/" + id, .client_address = ""};
      int slot = reg->publish(who, "n/" + id, Mode::kExclusive);
      reg->mark_held(slot);
      reg->clear(slot);
    }
  });
  // Read until enough records were seen, and several different ones (the writer kept
  // rewriting the slot meanwhile), so that a torn read had every chance to show; bounded in
  // reads and in time. A reader that never sees a record proves nothing, so that fails too.
  constexpr int kWantRecords = 200;
  constexpr size_t kWantDistinct = 3;
  constexpr int kMaxReads = 1'000'000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int seen = 0, reads = 0;
  std::set<char> distinct;
  while ((seen < kWantRecords || distinct.size() < kWantDistinct) && reads < kMaxReads &&
         std::chrono::steady_clock::now() < deadline) {
    ++reads;
    for (const RegistryEntry& e : Registry::read(dir.path()).entries) {
      ++seen;
      EXPECT_EQ(e.name, "n/" + e.request_id);
      EXPECT_EQ(e.path, "/" + e.request_id);
      EXPECT_EQ(e.request_id, std::string(30, e.request_id[0]));
      distinct.insert(e.request_id[0]);
    }
  }
  stop = true;
  writer.join();
  std::printf("whole records seen: %d in %d reads, %zu different\n", seen, reads, distinct.size());
  EXPECT_GE(seen, kWantRecords) << "the readers saw too few records to prove anything";
  EXPECT_GE(distinct.size(), kWantDistinct) << "the slot was not rewritten while being read";
}

}  // namespace
}  // namespace kagi::lock
