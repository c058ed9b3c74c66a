// The lost-edit demonstration (docs/OFFLINE_LOCKS.md): two editors, each a process of its
// own, edit one post over and over: load it, think (type), save. Run twice with the same load.
//
//   request locks only — every save takes the post's exclusive request lock and writes
//             atomically, as it should; but the lock ends with the save's request, and the
//             text saved is the one loaded before thinking. Two editors who loaded the same
//             version both save: the later save silently drops the earlier edit.
//   offline locks — an editor first asks for the post's exclusive-write offline lock. Denied,
//             it is told at once, before typing, and tries again later. Granted, it loads,
//             thinks and saves under the request lock, checking there that it still holds
//             the offline lock.
//
// An edit appends the editor's line to the text. Lost edits = acknowledged saves whose line
// is not in the final text. The test prints both runs and asserts lost > 0 without offline
// locks, and lost == 0 with them, with every refusal told before typing (no save refused
// after it).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/offline/lock_manager.hpp>
#include <kagi/offline/state_store.hpp>
#include <kagi/store/data_dir.hpp>
#include "../../support/child_process.hpp"

namespace kagi::offline {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kEditors = 2;
constexpr int kEdits = 100;  // saves each editor makes
constexpr const char* kPostLock = "bbs/board/general";
constexpr const char* kPostFile = "post.txt";
constexpr const char* kEditKey = "bbs/post/general/1";

struct Counts {
  std::atomic<int> saved;         // acknowledged saves
  std::atomic<int> told_early;    // refusals at the offline lock, before typing
  std::atomic<int> refused_late;  // saves refused after typing (the lock was gone)
};

struct Outcome {
  int saved = 0, lost = 0, told_early = 0, refused_late = 0;
};

class LostEditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-lost-edit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "data");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // One editor's process: its own lock service, data folder handle and lock manager.
  int editor(int me, bool offline_locks, Counts& counts) {
    lock::LockOptions lo;
    lo.dir = (root_ / "locks").string();
    lo.timeout = 30s;
    auto locks = lock::LockService::create(lo);
    std::error_code ec;
    auto data = store::DataDir::open({.dir = (root_ / "data").string(), .fsync = false}, ec);
    std::string why;
    StateOptions so;
    so.dir = root_.string();
    so.fsync = false;  // the demonstration is about ordering, not durability
    std::shared_ptr<StateStore> state = open_state_store(so, &why);
    if (!data || !state) return 2;
    LockManager manager(state, {});
    const Owner owner{"editor-" + std::to_string(me), "Editor " + std::to_string(me)};
    std::mt19937 rng(static_cast<unsigned>(me * 7919 + 1));
    std::uniform_int_distribution<int> think_us(200, 2000);

    for (int edit = 0; edit < kEdits;) {
      auto request = locks->context({"r", "POST", "/edit", "127.0.0.1"});
      if (offline_locks) {
        // Open the editor: the offline lock first, before loading anything.
        const Grant g = manager.acquire(kEditKey, Kind::kExclusiveWrite, owner, 60s).value();
        if (!g.granted()) {
          counts.told_early.fetch_add(1);  // told now, before typing: try again shortly
          std::this_thread::sleep_for(std::chrono::microseconds(think_us(rng) / 4));
          continue;
        }
      }
      // Load the post (under its shared request lock, released before thinking).
      std::string text;
      {
        auto guard = request->shared(kPostLock);
        text = data->read(guard, kPostFile).value();
      }
      request->end_request();
      // Type.
      std::this_thread::sleep_for(std::chrono::microseconds(think_us(rng)));
      const std::string line = "editor " + std::to_string(me) + " edit " + std::to_string(edit);
      // Save: the request lock for the read-modify-write of the save itself.
      auto save = locks->context({"s", "POST", "/edit", "127.0.0.1"});
      auto guard = save->exclusive(kPostLock);
      if (offline_locks && !manager.renew(kEditKey, owner.id).value()) {
        counts.refused_late.fetch_add(1);  // the offline lock was lost while typing
        continue;
      }
      data->commit(guard, kPostFile, text + line + "\n").check();
      counts.saved.fetch_add(1);
      ++edit;
      if (offline_locks) (void)manager.release(kEditKey, owner.id).value();
    }
    return 0;
  }

  Outcome run(bool offline_locks) {
    {
      lock::LockOptions lo;
      lo.dir = (root_ / "locks").string();
      auto locks = lock::LockService::create(lo);
      std::error_code ec;
      auto data = store::DataDir::open({.dir = (root_ / "data").string(), .fsync = false}, ec);
      auto request = locks->context({"init", "POST", "/", "127.0.0.1"});
      auto guard = request->exclusive(kPostLock);
      data->commit(guard, kPostFile, "the post\n").check();
    }
    void* mem =
        mmap(nullptr, sizeof(Counts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(mem, MAP_FAILED);
    auto* counts = new (mem) Counts{};
    std::vector<pid_t> editors;
    for (int e = 0; e < kEditors; ++e) {
      editors.push_back(test_support::spawn([&, e] { return editor(e, offline_locks, *counts); }));
    }
    for (pid_t p : editors) EXPECT_EQ(test_support::wait_exit(p), 0);
    const std::string text = read_file(root_ / "data" / kPostFile);
    Outcome out;
    out.saved = counts->saved.load();
    out.told_early = counts->told_early.load();
    out.refused_late = counts->refused_late.load();
    for (int e = 0; e < kEditors; ++e) {
      for (int i = 0; i < kEdits; ++i) {
        const std::string line =
            "editor " + std::to_string(e) + " edit " + std::to_string(i) + "\n";
        out.lost += text.find(line) == std::string::npos;
      }
    }
    munmap(mem, sizeof(Counts));
    return out;
  }

  static std::string read_file(const fs::path& p) {
    std::string out;
    if (FILE* f = std::fopen(p.c_str(), "rb")) {
      char buf[65536];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  }

  fs::path root_;
};

TEST_F(LostEditTest, WithoutOfflineLocksEditsAreLostWithThemNone) {
  const Outcome naive = run(false);
  const Outcome guarded = run(true);
  std::printf(
      "lost edits, %d editors x %d saves each, thinking 0.2-2 ms between load and save:\n"
      "  request locks only: %d saved, %d lost silently (%.0f%%)\n"
      "  offline locks:      %d saved, %d lost; %d refusals, all told before typing; %d saves "
      "refused after typing\n",
      kEditors, kEdits, naive.saved, naive.lost, 100.0 * naive.lost / naive.saved, guarded.saved,
      guarded.lost, guarded.told_early, guarded.refused_late);
  EXPECT_EQ(naive.saved, kEditors * kEdits);
  EXPECT_GT(naive.lost, 0) << "two editors interleaved this much must lose edits";
  EXPECT_EQ(guarded.saved, kEditors * kEdits);
  EXPECT_EQ(guarded.lost, 0);
  EXPECT_GT(guarded.told_early, 0) << "the editors met: one of them must have been refused";
  EXPECT_EQ(guarded.refused_late, 0) << "a refusal came only after typing";
}

}  // namespace
}  // namespace kagi::offline
