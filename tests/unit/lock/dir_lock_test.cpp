// The dir backend's filesystem protocol (lock/detail/dir_lock.hpp) step by step: owner records,
// entry names, what makes a record stale, and the takeover races of the seeds replayed with an
// exact interleaving — kagi's remove-by-exact-name beside the classic "check the age, then
// delete", run side by side and counted.
#include <kagi/lock/detail/dir_lock.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <kagi/lock/errors.hpp>
#include "../../support/child_process.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::lock::dirlock {
namespace {

using namespace std::chrono_literals;

HolderInfo who(const std::string& id) { return {id, "POST", "/bbs/3/post", "192.0.2.1"}; }

std::string first_line(const std::string& path) {
  char buf[128] = {};
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    [[maybe_unused]] ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
  }
  std::string s = buf;
  return s.substr(0, s.find('\n'));
}

// This process's pid namespace as the record and stage names write it (the inode's digits),
// read here without the code under test.
std::string my_pid_namespace() {
  char buf[64] = {};
  if (::readlink("/proc/self/ns/pid", buf, sizeof buf - 1) <= 0) return "";
  std::string s = buf;  // "pid:[4026531836]"
  return s.substr(s.find('[') + 1, s.find(']') - s.find('[') - 1);
}

// A pid that is not running: a child that exited and was reaped.
int dead_pid() {
  const pid_t child = test_support::spawn([] { return 0; });
  test_support::wait_exit(child);
  return child;
}

class DirLockTest : public ::testing::Test {
 protected:
  // A "process" on host `host` with its own view of the shared folder.
  std::unique_ptr<DirLocks> locks(const std::string& host, std::chrono::milliseconds lease = 10s,
                                  std::chrono::milliseconds skew = 30s) {
    return std::make_unique<DirLocks>(
        Config{.root = dir_.path() + "/dirlocks", .host = host, .lease = lease, .max_skew = skew});
  }
  test_support::TempDir dir_;
};

TEST_F(DirLockTest, OwnerRecordsRoundTripAndCannotBeForged) {
  Owner o{.name = "bbs/board/3",
          .host = "web1",
          .boot = "b00t",
          .pidns = "4026531836",

          .pid = 4242,
          .start = 99,
          .request = "1f-7",
          .route = "POST /x\nhost=evil%0A",
          .at_ms = 1700000000123,
          .lease_ms = 10000};
  Owner back;
  ASSERT_TRUE(parse_owner(format_owner(o), back));
  EXPECT_EQ(back.name, o.name);
  EXPECT_EQ(back.host, "web1");  // the route's newline did not add a field
  EXPECT_EQ(back.route, o.route);
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.start, 99u);
  EXPECT_EQ(back.at_ms, o.at_ms);
  EXPECT_FALSE(parse_owner("not a record", back));

  Entry e{.file = "", .mode = Mode::kExclusive, .nonce = 0xabc, .expiry_ms = 17, .token = 5};
  Entry parsed;
  ASSERT_TRUE(parse_entry(entry_file(e), parsed));
  EXPECT_EQ(parsed.nonce, 0xabcu);
  EXPECT_EQ(parsed.expiry_ms, 17);
  EXPECT_EQ(parsed.token, 5u);
  for (const char* bad : {"", "x", "x.", "y.1.2.3", "x.zz.1.2", "x.1.2", "x.1.2.3.", ".."}) {
    EXPECT_FALSE(parse_entry(bad, parsed)) << bad;
  }
}

TEST_F(DirLockTest, ExclusiveExcludesAndTokensGrowPerGrant) {
  auto a = locks("a"), b = locks("b");
  Hold ha, hb;
  ASSERT_FALSE(a->try_lock("t/x", Mode::kExclusive, who("a"), true, ha, nullptr));
  EXPECT_EQ(b->try_lock("t/x", Mode::kExclusive, who("b"), true, hb, nullptr), Errc::kTimeout);
  EXPECT_EQ(b->try_lock("t/x", Mode::kShared, who("b"), true, hb, nullptr), Errc::kTimeout);
  Owner o;
  const auto entries = b->entries("t/x");
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(b->read_owner(b->lock_dir("t/x"), entries[0], o));
  EXPECT_EQ(o.host, "a");
  EXPECT_EQ(o.request, "a");
  EXPECT_EQ(o.route, "POST /bbs/3/post");
  EXPECT_EQ(o.pid, ::getpid());
  const uint64_t first = ha.entry.token;
  EXPECT_GT(first, 0u);
  EXPECT_EQ(entries[0].token, first);  // in the record's name from the start
  a->release(ha);
  ASSERT_FALSE(b->try_lock("t/x", Mode::kExclusive, who("b"), true, hb, nullptr));
  EXPECT_GT(hb.entry.token, first);
  EXPECT_EQ(b->entries("t/x").at(0).token, hb.entry.token);
  ASSERT_FALSE(b->renew(hb));
  EXPECT_EQ(b->entries("t/x").at(0).token, hb.entry.token);
  b->release(hb);
  EXPECT_FALSE(std::filesystem::exists(a->lock_dir("t/x")));  // nothing left but the counter
}

TEST_F(DirLockTest, ReadersShareAndAWaitingWriterStopsNewReaders) {
  auto a = locks("a"), b = locks("b"), w = locks("w");
  Hold r1, r2, r3, wx;
  ASSERT_FALSE(a->try_lock("t/s", Mode::kShared, who("r1"), true, r1, nullptr));
  ASSERT_FALSE(b->try_lock("t/s", Mode::kShared, who("r2"), true, r2, nullptr));
  EXPECT_EQ(b->entries("t/s").size(), 2u);
  EXPECT_EQ(w->try_lock("t/s", Mode::kExclusive, who("w"), true, wx, nullptr), Errc::kTimeout);
  const int64_t intent_expiry = wall_ms() + 10000;
  ASSERT_FALSE(w->add_intent("t/s", 7, intent_expiry));
  EXPECT_EQ(a->try_lock("t/s", Mode::kShared, who("r3"), true, r3, nullptr), Errc::kTimeout);
  a->release(r1);
  b->release(r2);
  ASSERT_FALSE(w->try_lock("t/s", Mode::kExclusive, who("w"), true, wx, nullptr));
  w->remove_intent("t/s", 7, intent_expiry);
  w->release(wx);
  EXPECT_FALSE(a->writer_waiting("t/s"));
}

// The seeds' race, with the steps in a fixed order (seed 002's list): A and B both see the old
// lock and judge it stale; A deletes it; C creates a new one; B deletes. The classic version
// (a lock directory, judged by its mtime, removed with rmdir) deletes C's fresh lock every time;
// kagi's removal names the exact record A and B saw, so B's removal finds nothing and C keeps
// its lock.
TEST_F(DirLockTest, TheSeedsTakeoverRaceNeverDeletesANewLock) {
  constexpr int kRounds = 100;
  int kagi_deleted_new = 0, naive_deleted_new = 0;
  auto old_holder = locks("old", 1ms, 0ms);  // a lease of 1 ms: stale almost at once
  auto a = locks("a", 10s, 0ms), b = locks("b", 10s, 0ms), c = locks("c", 10s, 0ms);
  auto d = locks("d", 10s, 0ms);  // comes last: must find C's lock held
  const std::string naive = dir_.path() + "/naive.lock";
  for (int round = 0; round < kRounds; ++round) {
    // kagi.
    Hold old, fresh;
    ASSERT_FALSE(old_holder->try_lock("race/x", Mode::kExclusive, who("old"), true, old, nullptr));
    std::this_thread::sleep_for(2ms);
    const auto seen_by_a = a->entries("race/x");
    const auto seen_by_b = b->entries("race/x");
    ASSERT_EQ(seen_by_a.size(), 1u);
    ASSERT_FALSE(a->stale_reason("race/x", seen_by_a[0], 0s).empty());
    ASSERT_FALSE(b->stale_reason("race/x", seen_by_b[0], 0s).empty());
    EXPECT_TRUE(a->remove_stale("race/x", seen_by_a[0]));  // A deletes
    ASSERT_FALSE(c->try_lock("race/x", Mode::kExclusive, who("c"), true, fresh, nullptr));  // C
    const bool b_removed = b->remove_stale("race/x", seen_by_b[0]);  // B deletes
    const auto left = c->entries("race/x");
    // C's lock survived only if its record is the one there, D cannot take the name, and C
    // can still renew (its record is there under its name).
    Hold late;
    const bool d_took = !d->try_lock("race/x", Mode::kExclusive, who("d"), true, late, nullptr);
    if (b_removed || left.size() != 1 || left[0].nonce != fresh.entry.nonce || d_took ||
        c->renew(fresh)) {
      ++kagi_deleted_new;
    }
    if (d_took) d->release(late);
    c->release(fresh);

    // The classic version, same steps.
    ASSERT_EQ(::mkdir(naive.c_str(), 0700), 0);
    const timespec past[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 3600, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, naive.c_str(), past, 0), 0);  // made an hour ago
    auto old_enough = [&] {
      struct stat st {};
      return ::stat(naive.c_str(), &st) == 0 && st.st_mtime < ::time(nullptr) - 180;
    };
    const bool a_sees_old = old_enough(), b_sees_old = old_enough();
    if (a_sees_old) ::rmdir(naive.c_str());                              // A deletes
    ASSERT_EQ(::mkdir(naive.c_str(), 0700), 0);                          // C locks
    if (b_sees_old && ::rmdir(naive.c_str()) == 0) ++naive_deleted_new;  // B deletes C's lock
    ::rmdir(naive.c_str());
  }
  std::printf(
      "  the seeds' race, %d rounds: kagi deleted a new lock %d times, check-age-then-"
      "delete %d times\n",
      kRounds, kagi_deleted_new, naive_deleted_new);
  EXPECT_EQ(kagi_deleted_new, 0);
  EXPECT_EQ(naive_deleted_new, kRounds);
}

// A record renewed after a contender looked has another name: the contender's removal of what
// it saw removes nothing, and the holder keeps its lock.
TEST_F(DirLockTest, ARenewedRecordIsNeverRemoved) {
  auto holder = locks("h", 1ms, 0ms), taker = locks("t", 10s, 0ms);
  Hold h, t;
  ASSERT_FALSE(holder->try_lock("r/x", Mode::kExclusive, who("h"), true, h, nullptr));
  std::this_thread::sleep_for(2ms);
  const auto seen = taker->entries("r/x");
  ASSERT_FALSE(taker->stale_reason("r/x", seen.at(0), 0s).empty());
  ASSERT_FALSE(holder->renew(h));  // renewed after the taker looked
  EXPECT_FALSE(taker->remove_stale("r/x", seen[0]));
  EXPECT_EQ(taker->try_lock("r/x", Mode::kExclusive, who("t"), true, t, nullptr), Errc::kTimeout);
  EXPECT_FALSE(holder->renew(h));
  holder->release(h);
}

// Of many contenders removing the same stale record at once, exactly one succeeds.
TEST_F(DirLockTest, ExactlyOneContenderRemovesAStaleRecord) {
  for (int round = 0; round < 20; ++round) {
    auto holder = locks("h", 1ms, 0ms);
    Hold h;
    ASSERT_FALSE(holder->try_lock("one/x", Mode::kExclusive, who("h"), true, h, nullptr));
    std::this_thread::sleep_for(2ms);
    const auto seen = holder->entries("one/x");
    std::atomic<int> removed{0};
    std::barrier start(8);
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        auto me = locks("c" + std::to_string(i), 10s, 0ms);
        start.arrive_and_wait();
        removed += me->remove_stale("one/x", seen.at(0));
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(removed.load(), 1);
    EXPECT_EQ(holder->renew(h), Errc::kFenceLost);  // the old holder learns it lost the lock
  }
}

TEST_F(DirLockTest, WhatMakesARecordStale) {
  auto holder = locks("h"), other = locks("o");
  Hold h;
  ASSERT_FALSE(holder->try_lock("st/x", Mode::kExclusive, who("h"), true, h, nullptr));
  const Entry e = other->entries("st/x").at(0);
  EXPECT_EQ(other->stale_reason("st/x", e, 0s), "");  // a live holder on its lease
  // Not renewed for a whole lease, as this process saw it: stale on any clock.
  EXPECT_NE(other->stale_reason("st/x", e, 10s).find("not renewed"), std::string::npos);
  // Expired by more than the allowed skew on this host's clock.
  auto strict = locks("s", 10s, 0ms);
  Entry expired = e;
  expired.expiry_ms = wall_ms() - 5;
  EXPECT_NE(strict->stale_reason("st/x", expired, 0s).find("expired"), std::string::npos);
  holder->release(h);

  // On the same host (same host id and boot), a dead holder is stale at once, without a lease.
  const std::string root = dir_.path() + "/dirlocks";
  pid_t child = test_support::spawn([&] {
    DirLocks mine(Config{.root = root, .host = "h", .lease = 10s, .max_skew = 30s});
    Hold held;
    return mine.try_lock("st/dead", Mode::kExclusive, who("child"), true, held, nullptr) ? 1 : 0;
  });  // exits holding it: as if killed
  ASSERT_EQ(test_support::wait_exit(child), 0);
  const Entry dead = holder->entries("st/dead").at(0);
  EXPECT_NE(holder->stale_reason("st/dead", dead, 0s).find("is not running"), std::string::npos);
  // Another host cannot ask this host's kernel: it waits for the lease.
  EXPECT_EQ(other->stale_reason("st/dead", dead, 0s), "");
}

// A pid is looked up only for a record of this very host, boot *and* pid namespace: a container
// on the same kernel (same boot id, even the same host id by mistake) has pids of its own, and
// a record that does not say its namespace (an older kagi's) is not trusted either.
TEST_F(DirLockTest, APidIsCheckedOnlyInItsOwnPidNamespace) {
  auto h = locks("h");
  const std::string dir = h->lock_dir("ns/x");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const int pid = dead_pid();
  auto record = [&](const std::string& pidns_line) {
    return "kagi-dirlock 1\nname=ns/x\nhost=h\nboot=" +
           first_line("/proc/sys/kernel/random/boot_id") + "\n" + pidns_line +
           "pid=" + std::to_string(pid) + "\nstart=5\nat=1\nlease=10000\n";
  };
  const int64_t expiry = wall_ms() + 10000;
  auto put = [&](uint64_t nonce, const std::string& text) {
    Entry e{.file = "", .mode = Mode::kExclusive, .nonce = nonce, .expiry_ms = expiry, .token = 1};
    e.file = entry_file(e);
    EXPECT_EQ(::symlink(text.c_str(), (dir + "/" + e.file).c_str()), 0);
    return e;
  };
  ASSERT_FALSE(my_pid_namespace().empty());
  const Entry here = put(1, record("pidns=" + my_pid_namespace() + "\n"));
  const Entry other_container = put(2, record("pidns=1\n"));
  const Entry unknown = put(3, record(""));
  // A live pid whose record has no start time (its holder could not read its own): alive.
  const std::string live =
      "kagi-dirlock 1\nname=ns/x\nhost=h\nboot=" + first_line("/proc/sys/kernel/random/boot_id") +
      "\npidns=" + my_pid_namespace() + "\npid=" + std::to_string(::getpid()) +
      "\nstart=0\nat=1\nlease=10000\n";
  const Entry no_start = put(4, live);
  EXPECT_EQ(h->stale_reason("ns/x", no_start, 0s), "");
  EXPECT_NE(h->stale_reason("ns/x", here, 0s).find("is not running"), std::string::npos);
  EXPECT_EQ(h->stale_reason("ns/x", other_container, 0s), "");
  EXPECT_EQ(h->stale_reason("ns/x", unknown, 0s), "");
}

// Failing to look at a process is not evidence that it is dead: with every descriptor in use
// (EMFILE) /proc/PID/stat cannot be opened, and a live holder must stay live.
TEST_F(DirLockTest, AProcessThatCannotBeLookedAtIsAlive) {
  auto holder = locks("h");
  Hold held;
  ASSERT_FALSE(holder->try_lock("em/x", Mode::kExclusive, who("h"), true, held, nullptr));
  const pid_t child = test_support::spawn([&] {
    auto mine = locks("h");
    const Entry e = mine->entries("em/x").at(0);
    if (!mine->stale_reason("em/x", e, 0s).empty()) return 2;  // a live holder, descriptors free
    const rlimit few{32, 32};
    if (::setrlimit(RLIMIT_NOFILE, &few) != 0) return 3;
    while (::open("/dev/null", O_RDONLY) >= 0) {
    }
    if (errno != EMFILE) return 4;
    const std::string reason = mine->stale_reason("em/x", e, 0s);
    if (!reason.empty()) std::fprintf(stderr, "stale with EMFILE: %s\n", reason.c_str());
    return reason.empty() ? 0 : 1;
  });
  EXPECT_EQ(test_support::wait_exit(child), 0);
  holder->release(held);
}

// Stage folders are named "<host>.<pidns>.<pid>.<start>.<n>" and read from the right: a host id
// with dots is this host's own (its dead makers' folders are removed), and a host whose id
// starts with ours plus a dot is another host (its folders stay, whatever its pids).
TEST_F(DirLockTest, StageFoldersAreJudgedByTheirExactHostId) {
  const std::string stage = dir_.path() + "/dirlocks/.stage";
  std::filesystem::create_directories(stage);
  const std::string ns = my_pid_namespace();
  const std::string pid = std::to_string(dead_pid());
  auto make = [&](const std::string& n) {
    const std::string folder = stage + "/" + n;
    EXPECT_EQ(::mkdir(folder.c_str(), 0700), 0);
    EXPECT_EQ(::symlink("record", (folder + "/x.1.2.3").c_str()), 0);
    return folder;
  };
  const std::string mine = make("web1.example.org." + ns + "." + pid + ".5.0");
  const std::string other_host = make("web1.7." + ns + "." + pid + ".5.0");
  const std::string other_ns = make("web1.1." + pid + ".5.1");
  auto dotted = locks("web1.example.org");
  EXPECT_FALSE(std::filesystem::exists(mine)) << "a dead maker's folder of a dotted host id";
  auto web1 = locks("web1");
  struct stat st {};
  EXPECT_EQ(::lstat((other_host + "/x.1.2.3").c_str(), &st), 0) << "host web1.7's folder";
  EXPECT_EQ(::lstat((other_ns + "/x.1.2.3").c_str(), &st), 0) << "another pid namespace's";
}

// Rule 1 is judged on the lease the holder wrote in its record (it renews within a third of
// *its* lease), not on the contender's own: hosts may be configured differently, or be in the
// middle of a rolling change of locks.dir_lease_ms.
TEST_F(DirLockTest, TakeoverUsesTheHoldersRecordedLease) {
  auto long_holder = locks("h1", 10s), short_waiter = locks("w1", 1s);
  Hold a;
  ASSERT_FALSE(long_holder->try_lock("ls/a", Mode::kExclusive, who("h1"), true, a, nullptr));
  const Entry ea = short_waiter->entries("ls/a").at(0);
  EXPECT_EQ(short_waiter->stale_reason("ls/a", ea, 2s), "") << "taken within its 10 s lease";
  EXPECT_NE(short_waiter->stale_reason("ls/a", ea, 10s).find("holder's lease: 10000 ms"),
            std::string::npos);

  auto short_holder = locks("h2", 1s), long_waiter = locks("w2", 10s);
  Hold b;
  ASSERT_FALSE(short_holder->try_lock("ls/b", Mode::kExclusive, who("h2"), true, b, nullptr));
  const Entry eb = long_waiter->entries("ls/b").at(0);
  EXPECT_NE(long_waiter->stale_reason("ls/b", eb, 1500ms).find("not renewed"), std::string::npos)
      << "a 1 s lease unrenewed for 1.5 s";
  long_holder->release(a);
  short_holder->release(b);
}

// A record that cannot be parsed (damaged, or of a format this kagi does not know) does not
// wedge its lock: it is stale once unchanged for this process's lease plus the skew margin,
// not sooner.
TEST_F(DirLockTest, AnUnreadableRecordIsStaleAfterTheLeasePlusTheMargin) {
  auto w = locks("w", 1s, 1s);
  const std::string dir = w->lock_dir("bad/x");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  Entry e{
      .file = "", .mode = Mode::kExclusive, .nonce = 9, .expiry_ms = wall_ms() + 60000, .token = 1};
  e.file = entry_file(e);
  ASSERT_EQ(::symlink("not a record", (dir + "/" + e.file).c_str()), 0);
  EXPECT_EQ(w->stale_reason("bad/x", e, 1500ms), "");
  EXPECT_NE(w->stale_reason("bad/x", e, 2500ms).find("cannot be read"), std::string::npos);
}

// Fencing tokens: every grant's token is in its record's name as soon as the record can be
// seen, and the tokens of successive holders of a name strictly increase, whichever "host"
// (here: threads, each with its own DirLocks and host id) wins each round, and above what an
// older kagi's counter file (B.n, one byte per grant) had reached.
TEST_F(DirLockTest, FencingTokensStrictlyIncreaseInGrantOrder) {
  {
    auto setup = locks("setup");
    const std::string legacy = setup->counter_file("tok/x");
    const int fd = ::open(legacy.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "+++++", 5), 5);
    ::close(fd);
  }
  constexpr int kThreads = 4, kGrants = 60;
  std::mutex mu;
  std::vector<uint64_t> order;  // the tokens, in the order their holders held the name
  std::atomic<int> bad_names{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto me = locks("host" + std::to_string(i));
      for (int n = 0; n < kGrants;) {
        Hold h;
        if (me->try_lock("tok/x", Mode::kExclusive, who("t"), true, h, nullptr)) {
          std::this_thread::yield();
          continue;
        }
        const auto seen = me->entries("tok/x");
        if (seen.size() != 1 || seen[0].token != h.entry.token) ++bad_names;
        {
          std::lock_guard<std::mutex> lock(mu);
          order.push_back(h.entry.token);
        }
        me->release(h);
        ++n;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(order.size(), static_cast<size_t>(kThreads * kGrants));
  EXPECT_GT(order.front(), 5u) << "above the older counter's 5 grants";
  for (size_t i = 1; i < order.size(); ++i) {
    ASSERT_LT(order[i - 1], order[i]) << "grant " << i;
  }
  EXPECT_EQ(bad_names.load(), 0) << "a record's name did not carry its holder's token";
}

TEST_F(DirLockTest, TheDomainIdIsMadeOnceAndSharedByEveryHost) {
  std::error_code ec;
  const std::string root = dir_.path() + "/shared";
  const std::string first = domain_id(root, ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(first.size(), 32u);
  EXPECT_EQ(domain_id(root, ec), first);
  EXPECT_NE(domain_id(dir_.path() + "/other", ec), first);
}

}  // namespace
}  // namespace kagi::lock::dirlock
