#include <kagi/store/numbered_log.hpp>

#include <kagi/store/data_dir.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include "../support/temp_dir.hpp"

namespace kagi::store {

// A minimal item: an id and a text (found by argument-dependent lookup, like Post and Message).
struct Note {
  int64_t id = 0;
  std::string text;
  friend bool operator==(const Note&, const Note&) = default;
};
std::string encode(const Note& n) { return join_fields({"note1", std::to_string(n.id), n.text}); }
std::optional<Note> decode_note(std::string_view record) {
  auto f = split_fields(record, 3);
  if (!f || (*f)[0] != "note1") return std::nullopt;
  auto id = parse_int((*f)[1]);
  if (!id) return std::nullopt;
  return Note{*id, std::string((*f)[2])};
}

namespace {

using test_support::TempDir;
constexpr std::string_view kPath = "notes/a.log";
constexpr const char* kLock = "notes/a";

class NumberedLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lock::LockOptions lo;
    lo.dir = dir_.path() + "/locks";
    service_ = lock::LockService::create(lo);
    lock::HolderInfo who;
    who.request_id = "numbered-log-test";
    ctx_ = service_->context(who);
    std::error_code ec;
    // Two DataDirs with their own caches model two worker processes.
    for (auto& d : data_) {
      d = store::DataDir::open({.dir = dir_.path() + "/data", .fsync = false}, ec);
      ASSERT_TRUE(d) << ec.message();
    }
  }

  // What a process that never read the log before sees.
  std::vector<Note> fresh(const lock::Guard& g, int64_t* last_id = nullptr) {
    NumberedLogCache<Note> cache(kKeep, &decode_note);
    NumberedLog<Note> log = cache.read(*data_[0], g, kPath);
    if (last_id) *last_id = log.last_id;
    return {log.items.begin(), log.items.end()};
  }

  static constexpr size_t kKeep = 5;
  TempDir dir_;
  std::unique_ptr<lock::LockService> service_;
  std::unique_ptr<lock::LockContext> ctx_;
  std::unique_ptr<store::DataDir> data_[2];
  NumberedLogCache<Note> caches_[2]{{kKeep, &decode_note}, {kKeep, &decode_note}};
};

TEST_F(NumberedLogTest, ReadsOnlyWhatIsNewAndKeepsTheNewest) {
  auto g = ctx_->exclusive(kLock);
  NumberedLog<Note> log = caches_[0].read(*data_[0], g, kPath);
  EXPECT_TRUE(log.items.empty());
  EXPECT_EQ(log.last_id, 0);
  for (int64_t id = 1; id <= 8; ++id) {
    log = caches_[0].read(*data_[0], g, kPath);
    ASSERT_EQ(log.last_id, id - 1);
    add_numbered(*data_[id % 2], g, kPath, log, Note{id, "n" + std::to_string(id)}, kKeep);
  }
  log = caches_[0].read(*data_[0], g, kPath);
  EXPECT_EQ(log.last_id, 8);
  ASSERT_EQ(log.items.size(), kKeep);
  EXPECT_EQ(log.items.front().id, 4);
  EXPECT_EQ(log.items.back(), (Note{8, "n8"}));
}

// The log grows to kCompactAtKeepTimes × keep records, and the append beyond rewrites it with
// the high-water record and the newest `keep` items; readers see the newest `keep` throughout.
TEST_F(NumberedLogTest, CompactsOnlyBeyondFourTimesKeep) {
  auto g = ctx_->exclusive(kLock);
  const int64_t full = static_cast<int64_t>(kCompactAtKeepTimes * kKeep);
  NumberedLog<Note> log;
  for (int64_t id = 1; id <= full + 1; ++id) {
    log = caches_[0].read(*data_[0], g, kPath);
    ASSERT_EQ(log.records, static_cast<size_t>(id - 1)) << "compacted early, before item " << id;
    ASSERT_EQ(log.items.size(), std::min<size_t>(kKeep, static_cast<size_t>(id - 1)));
    add_numbered(*data_[0], g, kPath, log, Note{id, "n" + std::to_string(id)}, kKeep);
  }
  for (NumberedLogCache<Note>& cache : caches_) {  // the writer's, and another process's
    log = cache.read(*data_[1], g, kPath);
    EXPECT_EQ(log.records, kKeep + 1) << "the high-water record and the newest items";
    EXPECT_EQ(log.last_id, full + 1);
    ASSERT_EQ(log.items.size(), kKeep);
    EXPECT_EQ(log.items.front().id, full + 2 - static_cast<int64_t>(kKeep));
  }
}

// The property that matters: whatever the processes do (appends, compactions, deletes), a
// cached read equals a fresh read of the file. Random histories over two "processes".
TEST_F(NumberedLogTest, CachedReadsEqualFreshReadsThroughAnyHistory) {
  std::mt19937 rng(20261123);
  auto g = ctx_->exclusive(kLock);
  for (int step = 0; step < 600; ++step) {
    const int who = static_cast<int>(rng() % 2);
    NumberedLog<Note> log = caches_[who].read(*data_[who], g, kPath);
    if (rng() % 10 == 0 && !log.items.empty()) {
      // Delete one (a rewrite: a new file, which may reuse the old inode number).
      std::vector<Note> kept(log.items.begin(), log.items.end());
      kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(rng() % kept.size()));
      replace_numbered(*data_[who], g, kPath, std::span<const Note>(kept), log.last_id);
    } else {
      add_numbered(*data_[who], g, kPath, log, Note{log.last_id + 1, std::string(rng() % 40, 'x')},
                   kKeep);
    }
    int64_t want_last = 0;
    const std::vector<Note> want = fresh(g, &want_last);
    for (int p = 0; p < 2; ++p) {
      NumberedLog<Note> got = caches_[p].read(*data_[p], g, kPath);
      ASSERT_EQ(std::vector<Note>(got.items.begin(), got.items.end()), want)
          << "process " << p << " step " << step;
      ASSERT_EQ(got.last_id, want_last) << "process " << p << " step " << step;
    }
  }
}

// A flipped bit in the middle of a log loses the one item it hit: a fresh process still sees
// every item after it, numbers the next one above every id ever stored, and its append keeps
// them all (before, the read stopped at the damage, the next id was reused and the append cut
// the log there).
TEST_F(NumberedLogTest, DamageInTheMiddleNeitherLosesLaterItemsNorReusesIds) {
  constexpr size_t kBig = 100000;  // no compaction in this test
  constexpr int64_t kItems = 3000;
  auto g = ctx_->exclusive(kLock);
  {
    NumberedLogCache<Note> writer(kBig, &decode_note);
    std::vector<Note> notes;
    for (int64_t id = 1; id <= kItems; ++id)
      notes.push_back(Note{id, "note " + std::to_string(id)});
    replace_numbered(*data_[0], g, kPath, std::span<const Note>(notes), kItems);
  }
  const std::string file = dir_.path() + "/data/" + std::string(kPath);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 10] ^= 0x04;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

  for (int round = 0; round < 3; ++round) {
    NumberedLogCache<Note> cache(kBig, &decode_note);  // a fresh process each round
    NumberedLog<Note> log = cache.read(*data_[1], g, kPath);
    ASSERT_EQ(log.items.size(), static_cast<size_t>(kItems - 1 + round));
    ASSERT_EQ(log.last_id, kItems + round);
    add_numbered(*data_[1], g, kPath, log, Note{log.last_id + 1, "new"}, kBig);
  }
  NumberedLogCache<Note> cache(kBig, &decode_note);
  NumberedLog<Note> log = cache.read(*data_[0], g, kPath);
  std::set<int64_t> ids;
  for (const Note& n : log.items) EXPECT_TRUE(ids.insert(n.id).second) << "id reused: " << n.id;
  EXPECT_EQ(ids.size(), static_cast<size_t>(kItems - 1 + 3));
  EXPECT_EQ(*ids.rbegin(), kItems + 3);
  EXPECT_EQ(log.items.back(), (Note{kItems + 3, "new"}));
}

TEST_F(NumberedLogTest, AnotherLockGetsAPrivateCopy) {
  {
    auto g = ctx_->exclusive(kLock);
    NumberedLog<Note> log = caches_[0].read(*data_[0], g, kPath);
    add_numbered(*data_[0], g, kPath, log, Note{1, "one"}, kKeep);
    log = caches_[0].read(*data_[0], g, kPath);
    ASSERT_EQ(log.items.size(), 1u);
  }
  // A reader under another lock (an app bug the store also reports) must not share the
  // cached copy that holders of the right lock may be reading at the same moment.
  auto other = ctx_->shared("notes/other");
  NumberedLog<Note> mine = caches_[0].read(*data_[0], other, kPath);
  auto right = ctx_->shared(kLock);
  NumberedLog<Note> theirs = caches_[0].read(*data_[0], right, kPath);
  ASSERT_EQ(mine.items.size(), 1u);
  EXPECT_EQ(mine.items.front(), theirs.items.front());
  EXPECT_NE(mine.items.data(), theirs.items.data());
}

}  // namespace
}  // namespace kagi::store
