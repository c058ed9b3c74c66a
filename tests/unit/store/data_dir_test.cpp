#include <kagi/store/data_dir.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/damage.hpp>
#include <kagi/store/detail/kept_log.hpp>
#include <kagi/store/fault_fs.hpp>

#include "forwarding_fs.hpp"

namespace kagi::store {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// Files below `dir` whose name starts with ".kagi-tmp-".
std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().starts_with(".kagi-tmp-")) found.push_back(e.path());
  }
  return found;
}

// The real filesystem, counting the files opened (the known-unchanged read opens none) and the
// preads.
class CountingFs final : public testing::ForwardingFs {
 public:
  int open_at(int d, const char* n, int f, mode_t m) override {
    ++opens;
    return ForwardingFs::open_at(d, n, f, m);
  }
  int open_beneath(int d, const char* p, int f) override {
    ++opens;
    return ForwardingFs::open_beneath(d, p, f);
  }
  ssize_t pread(int fd, void* b, size_t n, off_t o) override {
    ++preads;
    return ForwardingFs::pread(fd, b, n, o);
  }
  int fstat(int fd, struct stat* st) override {
    ++timed_stats;
    return ForwardingFs::fstat(fd, st);
  }
  int fstat_birth(int fd, struct stat* st, int64_t* b, Times t) override {
    if (t == Times::kAsk) ++timed_stats;
    return ForwardingFs::fstat_birth(fd, st, b, t);
  }
  int stat_birth_at(int d, const char* p, struct stat* st, int64_t* b, Times t) override {
    if (t == Times::kAsk) ++timed_stats;
    return ForwardingFs::stat_birth_at(d, p, st, b, t);
  }
  std::atomic<int> opens{0};
  std::atomic<int> preads{0};
  std::atomic<int> timed_stats{0};  // statuses that asked the file's times
};

// The real filesystem, refusing (once `refuse` is set) to open an existing file read-write, as
// the kernel does for a file its owner made read-only: whichever user runs the test.
class ReadOnlyFilesFs final : public testing::ForwardingFs {
 public:
  int open_at(int d, const char* n, int f, mode_t m) override {
    if (refused(f)) return -EACCES;
    return ForwardingFs::open_at(d, n, f, m);
  }
  int open_beneath(int d, const char* p, int f) override {
    if (refused(f)) return -EACCES;
    return ForwardingFs::open_beneath(d, p, f);
  }
  std::atomic<bool> refuse{false};

 private:
  bool refused(int flags) const { return refuse && (flags & O_ACCMODE) != O_RDONLY; }
};

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    data_ = root_ / "data";
    lock::LockOptions lo;
    lo.dir = (root_ / "locks").string();
    lo.timeout = std::chrono::milliseconds(2000);
    service_ = lock::LockService::create(lo);
    lock::HolderInfo who;
    who.request_id = "store-test";
    ctx_ = service_->context(who);
    open_dir();
  }
  void TearDown() override {
    dir_.reset();
    ctx_.reset();
    service_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void open_dir(bool fsync = true, FileSystem* fsys = nullptr) {
    dir_.reset();
    std::error_code ec;
    DataOptions options{.dir = data_.string(), .fsync = fsync};
    dir_ = fsys ? DataDir::open(options, *fsys, ec) : DataDir::open(options, ec);
    ASSERT_TRUE(dir_) << ec.message();
  }

  fs::path root_, data_;
  // Declared before dir_ so that they outlive it (a DataDir uses its FileSystem to the end).
  FaultFs faulty_, faulty2_;
  CountingFs counting_;
  ReadOnlyFilesFs read_only_;
  std::unique_ptr<lock::LockService> service_;
  std::unique_ptr<lock::LockContext> ctx_;
  std::unique_ptr<DataDir> dir_;
};

TEST_F(DataDirTest, CommitThenRead) {
  auto board = ctx_->exclusive("bbs/board/3");
  EXPECT_EQ(dir_->read(board, "bbs/3.dat").value(), "");  // missing reads as empty
  EXPECT_FALSE(dir_->exists(board, "bbs/3.dat").value());
  ASSERT_TRUE(dir_->commit(board, "bbs/3.dat", "first").ok());
  EXPECT_EQ(dir_->read(board, "bbs/3.dat").value(), "first");
  EXPECT_TRUE(dir_->exists(board, "bbs/3.dat").value());
  ASSERT_TRUE(dir_->commit(board, "bbs/3.dat", std::string(300000, 'z')).ok());
  EXPECT_EQ(dir_->read(board, "bbs/3.dat").value(), std::string(300000, 'z'));
  EXPECT_EQ(slurp(data_ / "bbs" / "3.dat"), std::string(300000, 'z'));
  ASSERT_TRUE(dir_->commit(board, "bbs/3.dat", "").ok());
  EXPECT_EQ(dir_->read(board, "bbs/3.dat").value(), "");
  EXPECT_TRUE(temp_files(data_).empty());
}

TEST_F(DataDirTest, SharedGuardReads) {
  {
    auto w = ctx_->exclusive("bbs/board/1");
    ASSERT_TRUE(dir_->commit(w, "a/b/c.dat", "deep").ok());
    ASSERT_TRUE(dir_->append(w, "a/b/c.log", "r1").ok());
  }
  auto r = ctx_->shared("bbs/board/1");
  EXPECT_EQ(dir_->read(r, "a/b/c.dat").value(), "deep");
  EXPECT_EQ(dir_->read_log(r, "a/b/c.log").value(), std::vector<std::string>{"r1"});
  // dir_->commit(r, ...) does not compile: a SharedGuard is not an ExclusiveGuard.
  static_assert(!std::is_convertible_v<lock::SharedGuard&, const lock::ExclusiveGuard&>);
}

TEST_F(DataDirTest, RemoveDeletes) {
  auto g = ctx_->exclusive("x");
  ASSERT_TRUE(dir_->commit(g, "x.dat", "1").ok());
  ASSERT_TRUE(dir_->remove(g, "x.dat").ok());
  EXPECT_FALSE(dir_->exists(g, "x.dat").value());
  EXPECT_TRUE(dir_->remove(g, "x.dat").ok());
  EXPECT_TRUE(dir_->remove(g, "missing/x.dat").ok());
}

TEST_F(DataDirTest, RefusesHostilePaths) {
  auto g = ctx_->exclusive("x");
  fs::create_directories(root_ / "outside");
  spit(root_ / "outside" / "secret", "secret");
  for (std::string_view p :
       {std::string_view("../outside/secret"), std::string_view("/etc/passwd"),
        std::string_view("a/../../outside/secret"), std::string_view("a\0b", 3),
        std::string_view(""), std::string_view("a//b"), std::string_view(".kagi-tmp-1-1")}) {
    auto r = dir_->read(g, p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.status().code(), Errc::kUnsafePath) << p;
    EXPECT_TRUE(contains(r.status().message(), "read ")) << r.status().message();
    EXPECT_EQ(dir_->commit(g, p, "evil").code(), Errc::kUnsafePath) << p;
    EXPECT_EQ(dir_->append(g, p, "evil").code(), Errc::kUnsafePath) << p;
    EXPECT_EQ(dir_->read_log(g, p).status().code(), Errc::kUnsafePath) << p;
    EXPECT_EQ(dir_->remove(g, p).code(), Errc::kUnsafePath) << p;
  }
  EXPECT_EQ(
      dir_->read(g, "../outside/secret").status().message(),
      "read ../outside/secret: '..' segment: " + std::error_code(Errc::kUnsafePath).message());
  EXPECT_EQ(slurp(root_ / "outside" / "secret"), "secret");
}

TEST_F(DataDirTest, RefusesSymlinksBelowTheDataDir) {
  auto g = ctx_->exclusive("x");
  fs::create_directories(root_ / "outside");
  spit(root_ / "outside" / "secret", "secret");
  fs::create_directory_symlink(root_ / "outside", data_ / "evil");
  fs::create_symlink(root_ / "outside" / "secret", data_ / "link.dat");

  for (std::string_view p : {"evil/secret", "link.dat"}) {
    auto r = dir_->read(g, p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.status().code(), Errc::kUnsafePath) << p;
    EXPECT_TRUE(contains(r.status().message(), "symlink")) << r.status().message();
    EXPECT_EQ(dir_->append(g, p, "evil").code(), Errc::kUnsafePath) << p;
    EXPECT_EQ(dir_->read_log(g, p).status().code(), Errc::kUnsafePath) << p;
  }
  EXPECT_EQ(dir_->commit(g, "evil/secret", "evil").code(), Errc::kUnsafePath);
  EXPECT_EQ(dir_->commit(g, "evil/new", "evil").code(), Errc::kUnsafePath);
  EXPECT_EQ(slurp(root_ / "outside" / "secret"), "secret");
  EXPECT_FALSE(fs::exists(root_ / "outside" / "new"));
}

TEST_F(DataDirTest, ReleasedGuardIsRefusedAndOldContentStays) {
  auto g = ctx_->exclusive("bbs/board/1");
  ASSERT_TRUE(dir_->commit(g, "b.dat", "old").ok());
  ASSERT_TRUE(dir_->append(g, "b.log", "old").ok());
  g.release();
  Status s = dir_->commit(g, "b.dat", "new");
  EXPECT_EQ(s.code(), Errc::kNotHeld);
  EXPECT_TRUE(contains(s.message(), "commit b.dat: ")) << s.message();
  EXPECT_TRUE(contains(s.message(), "does not hold its lock")) << s.message();
  EXPECT_EQ(dir_->append(g, "b.log", "new").code(), Errc::kNotHeld);
  EXPECT_EQ(dir_->remove(g, "b.dat").code(), Errc::kNotHeld);
  EXPECT_EQ(dir_->read(g, "b.dat").status().code(), Errc::kNotHeld);
  EXPECT_EQ(slurp(data_ / "b.dat"), "old");
  auto again = ctx_->shared("bbs/board/1");
  EXPECT_EQ(dir_->read_log(again, "b.log").value(), std::vector<std::string>{"old"});
  EXPECT_TRUE(temp_files(data_).empty());
}

TEST_F(DataDirTest, GuardsFromAnEndedRequestAreRefused) {
  auto g = ctx_->exclusive("bbs/board/2");
  ASSERT_TRUE(dir_->commit(g, "c.dat", "old").ok());
  ctx_->end_request();
  EXPECT_FALSE(dir_->commit(g, "c.dat", "new").ok());
  lock::ExclusiveGuard none;
  EXPECT_EQ(dir_->commit(none, "c.dat", "new").code(), Errc::kNotHeld);
  EXPECT_EQ(slurp(data_ / "c.dat"), "old");
}

TEST_F(DataDirTest, AppendAndReadLog) {
  auto g = ctx_->exclusive("chat/room/lobby");
  std::vector<std::string> want;
  for (int i = 0; i < 50; ++i) {
    want.push_back("message " + std::to_string(i) + std::string(static_cast<size_t>(i), '\n'));
    ASSERT_TRUE(dir_->append(g, "chat/lobby.log", want.back()).ok());
  }
  EXPECT_EQ(dir_->read_log(g, "chat/lobby.log").value(), want);
  auto last = dir_->read_log(g, "chat/lobby.log", 3).value();
  EXPECT_EQ(last, std::vector<std::string>(want.end() - 3, want.end()));
  EXPECT_TRUE(dir_->read_log(g, "chat/none.log").value().empty());
  EXPECT_EQ(dir_->append(g, "big.log", std::string((16u << 20) + 1, 'x')).code(), Errc::kTooLarge);
}

TEST_F(DataDirTest, AppendsFromTwoProcessesInterleave) {
  // Two DataDirs model two processes: each must verify what the other appended.
  std::error_code ec;
  auto other = DataDir::open(DataOptions{.dir = data_.string(), .fsync = false}, ec);
  ASSERT_TRUE(other);
  auto g = ctx_->exclusive("l");
  std::vector<std::string> want;
  for (int i = 0; i < 20; ++i) {
    want.push_back(std::to_string(i));
    ASSERT_TRUE((i % 3 ? dir_ : other)->append(g, "l.log", want.back()).ok());
  }
  EXPECT_EQ(dir_->read_log(g, "l.log").value(), want);
  // A log replaced behind this process's back (a new inode) is re-read from the start.
  ASSERT_TRUE(other->remove(g, "l.log").ok());
  ASSERT_TRUE(other->append(g, "l.log", "fresh").ok());
  ASSERT_TRUE(dir_->append(g, "l.log", "next").ok());
  EXPECT_EQ(dir_->read_log(g, "l.log").value(), (std::vector<std::string>{"fresh", "next"}));
}

// Rewrites `path` in place (the same inode), as a log whose records are `records`: what a
// replaced log looks like when the new file reuses the old inode number.
void rewrite_in_place(const fs::path& path, const std::vector<std::string>& records,
                      DataDir& scratch, const lock::ExclusiveGuard& g) {
  ASSERT_TRUE(scratch.rewrite_log(g, "scratch.log", records).ok());
  const std::string bytes = slurp(fs::path(scratch.dir()) / "scratch.log");
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  spit(path, bytes);  // truncates and writes the same file
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(before.st_ino, after.st_ino);
}

TEST_F(DataDirTest, ReadLogSinceReturnsOnlyWhatIsNew) {
  auto g = ctx_->exclusive("l");
  LogCursor cursor;
  LogTail first = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_TRUE(first.restarted);  // nothing there yet
  EXPECT_TRUE(first.records.empty());
  ASSERT_TRUE(dir_->append(g, "s.log", "one").ok());
  ASSERT_TRUE(dir_->append(g, "s.log", "two").ok());
  LogTail all = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_TRUE(all.restarted);
  EXPECT_EQ(all.records, (std::vector<std::string>{"one", "two"}));
  LogTail none = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_FALSE(none.restarted);
  EXPECT_TRUE(none.records.empty());
  // Appends by "another process" (a second DataDir) are picked up too.
  std::error_code ec;
  auto other = DataDir::open(DataOptions{.dir = data_.string(), .fsync = false}, ec);
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->append(g, "s.log", "three").ok());
  ASSERT_TRUE(dir_->append(g, "s.log", "four").ok());
  LogTail more = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_FALSE(more.restarted);
  EXPECT_EQ(more.records, (std::vector<std::string>{"three", "four"}));
  // A rewrite (a new file) starts over, with the whole new log.
  ASSERT_TRUE(other->rewrite_log(g, "s.log", {"compacted", "four"}).ok());
  LogTail again = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_TRUE(again.restarted);
  EXPECT_EQ(again.records, (std::vector<std::string>{"compacted", "four"}));
  // So does a removed log.
  ASSERT_TRUE(other->remove(g, "s.log").ok());
  LogTail gone = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_TRUE(gone.restarted);
  EXPECT_TRUE(gone.records.empty());
}

TEST_F(DataDirTest, ReadLogSinceSeesAReplacementThatReusesTheInode) {
  auto g = ctx_->exclusive("l");
  for (const char* r : {"a", "b", "c"}) ASSERT_TRUE(dir_->append(g, "s.log", r).ok());
  LogCursor cursor;
  ASSERT_EQ(dir_->read_log_since(g, "s.log", cursor).value().records.size(), 3u);
  // Longer than before, same inode, other records: offsets no longer line up.
  rewrite_in_place(data_ / "s.log", {"a much longer first record", "x", "y", "z"}, *dir_, g);
  LogTail tail = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_TRUE(tail.restarted);
  EXPECT_EQ(tail.records, (std::vector<std::string>{"a much longer first record", "x", "y", "z"}));
}

// A later file that reuses the inode number AND has the same record header at the same
// offset (possible after two rewrites) still differs in birth time, where the filesystem
// keeps one: modelled by a cursor whose birth time is off by one.
TEST_F(DataDirTest, ReadLogSinceSeesAnotherBirthTime) {
  auto g = ctx_->exclusive("l");
  for (const char* r : {"a", "b"}) ASSERT_TRUE(dir_->append(g, "s.log", r).ok());
  LogCursor cursor;
  ASSERT_EQ(dir_->read_log_since(g, "s.log", cursor).value().records.size(), 2u);
  if (cursor.birth_ns == 0) GTEST_SKIP() << "this filesystem keeps no birth time";
  LogTail same = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_FALSE(same.restarted);
  cursor.birth_ns += 1;
  LogTail other = dir_->read_log_since(g, "s.log", cursor).value();
  EXPECT_TRUE(other.restarted);
  EXPECT_EQ(other.records, (std::vector<std::string>{"a", "b"}));
}

// On a local filesystem, a reader of a log nobody wrote since its cursor's read knows it
// unchanged from one statx of its path: no open. Every change still reaches the reader: an
// append by another process, a same-sized rewrite in place, a replacement, a removal, a symlink
// put in its place. A writer (an exclusive guard) is about to append and always opens the log.
TEST_F(DataDirTest, AnUnchangedLogIsKnownWithoutOpeningIt) {
  open_dir(true, &counting_);
  std::error_code ec;
  auto other = DataDir::open(DataOptions{.dir = data_.string(), .fsync = false}, ec);
  ASSERT_TRUE(other);
  const auto write = [&](const std::function<void(const lock::ExclusiveGuard&)>& change) {
    auto w = ctx_->exclusive("l");
    change(w);
  };
  LogCursor cursor;
  const auto read = [&] {
    auto r = ctx_->shared("l");
    return dir_->read_log_since(r, "s.log", cursor);
  };
  const auto unchanged_read_opens = [&] {
    const int before = counting_.opens;
    LogTail same = read().value();
    EXPECT_FALSE(same.restarted);
    EXPECT_TRUE(same.records.empty());
    return counting_.opens - before;
  };
  write([&](const lock::ExclusiveGuard& w) {
    for (const char* r : {"ab", "c"}) ASSERT_TRUE(dir_->append(w, "s.log", r).ok());
  });
  ASSERT_EQ(read().value().records.size(), 2u);
  if (cursor.birth_ns == 0) GTEST_SKIP() << "this filesystem keeps no birth time";
  EXPECT_EQ(unchanged_read_opens(), 0);
  write([&](const lock::ExclusiveGuard& w) {
    const int before = counting_.opens;
    LogCursor writers = cursor;
    EXPECT_TRUE(dir_->read_log_since(w, "s.log", writers).value().records.empty());
    EXPECT_EQ(counting_.opens - before, 0)
        << "a writer's read takes the descriptor this thread's last append kept";
  });

  write([&](const lock::ExclusiveGuard& w) { ASSERT_TRUE(other->append(w, "s.log", "d").ok()); });
  EXPECT_EQ(read().value().records, (std::vector<std::string>{"d"}));
  EXPECT_EQ(unchanged_read_opens(), 0);

  // The same size and inode, other records (the last one too, which the opening read checks):
  // the metadata differs only in the change time (a coarse clock ticks within 10 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write([&](const lock::ExclusiveGuard& w) {
    rewrite_in_place(data_ / "s.log", {"a", "bc", "e"}, *other, w);
  });
  LogTail rewritten = read().value();
  EXPECT_TRUE(rewritten.restarted);
  EXPECT_EQ(rewritten.records, (std::vector<std::string>{"a", "bc", "e"}));
  EXPECT_EQ(unchanged_read_opens(), 0);

  write([&](const lock::ExclusiveGuard& w) {
    ASSERT_TRUE(other->rewrite_log(w, "s.log", {"compacted"}).ok());
  });
  LogTail replaced = read().value();
  EXPECT_TRUE(replaced.restarted);
  EXPECT_EQ(replaced.records, (std::vector<std::string>{"compacted"}));

  // A symlink to the very file the cursor read stands in its place: refused, not trusted.
  fs::rename(data_ / "s.log", data_ / "real.log");
  fs::create_symlink("real.log", data_ / "s.log");
  EXPECT_FALSE(read().ok());
  fs::remove(data_ / "s.log");
  LogTail gone = read().value();
  EXPECT_TRUE(gone.restarted);
  EXPECT_TRUE(gone.records.empty());
}

// A post (a read and an append under one exclusive guard) asks no file times: on Linux 6.13 and
// later, a status that asks them makes the next write to the file stamp a fine-grained time and
// dirty the inode (fs.hpp). What it checks instead: the same file, and within one grant, its
// size; across grants, the last record's header (one pread).
TEST_F(DataDirTest, APostAsksNoFileTimes) {
  open_dir(false, &counting_);
  LogCursor cursor;
  const auto post = [&](const char* record) {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->read_log_since(w, "t.log", cursor).ok());
    ASSERT_TRUE(dir_->append(w, "t.log", record).ok());
  };
  post("first");  // makes the log, and keeps it open
  post("second");
  if (cursor.birth_ns == 0) GTEST_SKIP() << "this filesystem keeps no birth time";
  const int timed = counting_.timed_stats, preads = counting_.preads, opens = counting_.opens;
  for (const char* record : {"third", "fourth", "fifth"}) post(record);
  EXPECT_EQ(counting_.timed_stats - timed, 0) << "statuses of a post that asked the file's times";
  EXPECT_EQ(counting_.preads - preads, 3) << "one pread per post: its read's check of the cursor";
  EXPECT_EQ(counting_.opens - opens, 0);
  {
    auto r = ctx_->shared("l");
    EXPECT_EQ(dir_->read_log(r, "t.log").value(),
              (std::vector<std::string>{"first", "second", "third", "fourth", "fifth"}));
  }
  // Within one grant the size is what tells the log unchanged: an append between the post's
  // read and its append, by a process under a wrong lock, grows it, and stays in place.
  std::error_code ec;
  auto other = DataDir::open(DataOptions{.dir = data_.string(), .fsync = false}, ec);
  ASSERT_TRUE(other);
  {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->read_log_since(w, "t.log", cursor).ok());
    auto wrong = ctx_->exclusive("m");
    ASSERT_TRUE(other->append(wrong, "t.log", "under a wrong lock").ok());
    ASSERT_TRUE(dir_->append(w, "t.log", "sixth").ok());
  }
  auto r = ctx_->shared("l");
  EXPECT_EQ(dir_->read_log(r, "t.log").value(),
            (std::vector<std::string>{"first", "second", "third", "fourth", "fifth",
                                      "under a wrong lock", "sixth"}));
}

// A post reads its board's log and then appends under one exclusive guard: the append takes the
// descriptor the read opened (only under the same grant, and only while the file is still
// linked), and leaves it with the thread; the next post's read takes it after one statx finds
// the path still naming that file. So a thread posting to one board opens its log once.
TEST_F(DataDirTest, AWriterKeepsItsLogOpenWhileThePathNamesIt) {
  open_dir(false, &counting_);
  std::error_code ec;
  auto other = DataDir::open(DataOptions{.dir = data_.string(), .fsync = false}, ec);
  ASSERT_TRUE(other);
  LogCursor cursor;
  const auto opens_of = [&](const std::function<void()>& work) {
    const int before = counting_.opens;
    work();
    return counting_.opens - before;
  };
  const auto post = [&](const char* record) {
    auto w = ctx_->exclusive("l");
    LogTail tail = dir_->read_log_since(w, "p.log", cursor).value();
    EXPECT_TRUE(dir_->append(w, "p.log", record).ok());
    return tail;
  };
  const auto records_of = [&](const char* path) {
    auto r = ctx_->shared("l");
    return dir_->read_log(r, path).value();
  };
  post("first");  // makes the log
  EXPECT_EQ(opens_of([&] { EXPECT_EQ(post("second").records.size(), 1u); }), 0)
      << "the first post's descriptor, the path checked";
  // What is new past a cursor is read in one pread with the check that the cursor holds; a log
  // found unchanged by the fstat of its open descriptor, in none.
  {
    auto w = ctx_->exclusive("l");
    const int before = counting_.preads;
    EXPECT_EQ(dir_->read_log_since(w, "p.log", cursor).value().records,
              std::vector<std::string>{"second"});
    EXPECT_EQ(counting_.preads - before, 1);
    EXPECT_TRUE(dir_->read_log_since(w, "p.log", cursor).value().records.empty());
    if (cursor.birth_ns != 0) {
      EXPECT_EQ(counting_.preads - before, 1);
    }
  }
  // Read under one grant, append under the next: the lock was free in between, so what the
  // read kept is not used.
  {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->read_log_since(w, "p.log", cursor).ok());
  }
  {
    auto w = ctx_->exclusive("l");
    EXPECT_EQ(opens_of([&] { ASSERT_TRUE(dir_->append(w, "p.log", "third").ok()); }), 1);
  }
  // The log replaced between the read and the append (by a writer under another lock, as a
  // buggy app might): the record goes to the file the path names now, not to the old one.
  {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->read_log_since(w, "p.log", cursor).ok());
    auto wrong = ctx_->exclusive("m");
    ASSERT_TRUE(other->rewrite_log(wrong, "p.log", {"compacted"}).ok());
    ASSERT_TRUE(dir_->append(w, "p.log", "fourth").ok());
  }
  EXPECT_EQ(records_of("p.log"), (std::vector<std::string>{"compacted", "fourth"}));

  // Between posts, another process replaces the log (under the lock, as a compaction does):
  // the next post's read finds another file at the path, and opens it.
  post("fifth");
  {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(other->rewrite_log(w, "p.log", {"compacted again"}).ok());
  }
  EXPECT_EQ(opens_of([&] { EXPECT_TRUE(post("sixth").restarted); }), 1);
  EXPECT_EQ(records_of("p.log"), (std::vector<std::string>{"compacted again", "sixth"}));

  // A hard-linked backup of the log, then a replacement: the kept file is still linked (as the
  // backup), but the path names another file. The post goes there; the backup is left alone.
  post("seventh");
  fs::create_hard_link(data_ / "p.log", data_ / "backup.log");
  {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(other->rewrite_log(w, "p.log", {"replaced"}).ok());
  }
  EXPECT_EQ(post("eighth").records, (std::vector<std::string>{"replaced"}));
  EXPECT_EQ(records_of("p.log"), (std::vector<std::string>{"replaced", "eighth"}));
  EXPECT_EQ(records_of("backup.log"),
            (std::vector<std::string>{"compacted again", "sixth", "seventh"}));

  // Moved away by hand, and a new log begun at the path: the same.
  fs::rename(data_ / "p.log", data_ / "moved.log");
  {
    auto w = ctx_->exclusive("l");
    ASSERT_TRUE(other->append(w, "p.log", "fresh").ok());
  }
  EXPECT_EQ(post("ninth").records, (std::vector<std::string>{"fresh"}));
  EXPECT_EQ(records_of("p.log"), (std::vector<std::string>{"fresh", "ninth"}));
  EXPECT_EQ(records_of("moved.log"), (std::vector<std::string>{"replaced", "eighth"}));

  // A new owner (as by `chown`, which a read-write descriptor would ignore): opened again.
  post("tenth");
  if (::chown((data_ / "p.log").c_str(), 4242, 4242) == 0) {  // root only
    EXPECT_EQ(opens_of([&] { post("eleventh"); }), 1);
    EXPECT_EQ(opens_of([&] { post("twelfth"); }), 0) << "kept again, as the file is now";
  }
}

// A thread posting to several boards keeps each board's log (up to detail::kKeptPerThread): posts
// to eight boards in turn open each log once. A ninth board takes the slot of the log kept
// longest ago, which its next post then opens again.
TEST_F(DataDirTest, AWriterKeepsTheLogsOfSeveralBoards) {
  open_dir(false, &counting_);
  constexpr int kBoards = static_cast<int>(detail::kKeptPerThread);
  std::vector<LogCursor> cursors(kBoards + 1);
  const auto post = [&](int board) {
    const std::string log = "b" + std::to_string(board) + ".log";
    auto w = ctx_->exclusive("board" + std::to_string(board));
    ASSERT_TRUE(dir_->read_log_since(w, log, cursors[board]).ok());
    ASSERT_TRUE(dir_->append(w, log, "post").ok());
  };
  for (int board = 0; board < kBoards; ++board) post(board);  // makes the logs
  EXPECT_EQ(detail::kept_logs(), detail::kKeptPerThread);
  const int before = counting_.opens;
  for (int round = 0; round < 3; ++round) {
    for (int board = 0; board < kBoards; ++board) post(board);
  }
  EXPECT_EQ(counting_.opens - before, 0) << "each board's log was kept";
  post(kBoards);  // a ninth board: board 0's log, kept longest ago, is closed for it
  EXPECT_EQ(detail::kept_logs(), detail::kKeptPerThread);
  int opened = counting_.opens;
  post(1);
  EXPECT_EQ(counting_.opens - opened, 0) << "board 1's log is still kept";
  opened = counting_.opens;
  post(0);
  EXPECT_EQ(counting_.opens - opened, 1) << "board 0's log had to be opened again";
}

// A log made read-only by hand can still be read under an exclusive guard (the read opens it
// read-write only to keep it for an append).
TEST_F(DataDirTest, AReadOnlyLogIsStillReadUnderAnExclusiveGuard) {
  open_dir(false, &read_only_);
  auto w = ctx_->exclusive("l");
  ASSERT_TRUE(dir_->append(w, "ro.log", "kept").ok());
  // Made read-only as by `chmod a-w` (the mode the path is checked for; the filesystem refuses
  // the writable open, as the kernel does for a user that is not root).
  fs::permissions(data_ / "ro.log", fs::perms::owner_read);
  read_only_.refuse = true;
  LogCursor cursor;
  EXPECT_EQ(dir_->read_log_since(w, "ro.log", cursor).value().records,
            std::vector<std::string>{"kept"});
  EXPECT_FALSE(dir_->append(w, "ro.log", "refused").ok()) << "the file takes no writes";
}

// The append hint is a cursor too: a log replaced in place must not be cut at the old end
// (which would drop the new file's records).
TEST_F(DataDirTest, AppendAfterAReplacementThatReusesTheInodeKeepsEveryRecord) {
  auto g = ctx_->exclusive("l");
  for (const char* r : {"a", "b", "c"}) ASSERT_TRUE(dir_->append(g, "s.log", r).ok());
  rewrite_in_place(data_ / "s.log", {"a much longer first record", "x", "y", "z"}, *dir_, g);
  ASSERT_TRUE(dir_->append(g, "s.log", "next").ok());
  EXPECT_EQ(dir_->read_log(g, "s.log").value(),
            (std::vector<std::string>{"a much longer first record", "x", "y", "z", "next"}));
  // The old end inside the new file's last record, where no intact record follows to resync
  // on: only the header check tells the replacement (else the record would be cut as torn).
  const std::string one_long(200, 'L');
  rewrite_in_place(data_ / "s.log", {one_long}, *dir_, g);
  ASSERT_TRUE(dir_->append(g, "s.log", "after").ok());
  EXPECT_EQ(dir_->read_log(g, "s.log").value(), (std::vector<std::string>{one_long, "after"}));
}

TEST_F(DataDirTest, ReadLogSinceStopsBeforeATornTail) {
  auto g = ctx_->exclusive("l");
  ASSERT_TRUE(dir_->append(g, "t.log", "whole").ok());
  const std::string good = slurp(data_ / "t.log");
  ASSERT_TRUE(dir_->append(g, "t.log", "torn by a crash").ok());
  const std::string full = slurp(data_ / "t.log");
  spit(data_ / "t.log", std::string_view(full).substr(0, full.size() - 3));
  open_dir();  // a fresh process
  LogCursor cursor;
  EXPECT_EQ(dir_->read_log_since(g, "t.log", cursor).value().records,
            std::vector<std::string>{"whole"});
  EXPECT_EQ(cursor.end, good.size());
  ASSERT_TRUE(dir_->append(g, "t.log", "after").ok());  // drops the torn tail
  LogTail tail = dir_->read_log_since(g, "t.log", cursor).value();
  EXPECT_FALSE(tail.restarted);
  EXPECT_EQ(tail.records, std::vector<std::string>{"after"});
}

// The kernel's one-call resolution (openat2) where it is available, the walk where not:
// same results, and the walk only when needed.
TEST_F(DataDirTest, ExistingFilesOpenInOneCallAndSymlinksAreStillRefused) {
  FaultFs& fsys = faulty_;
  fsys.allow_direct_open(true);
  open_dir(true, &fsys);
  auto g = ctx_->exclusive("l");
  ASSERT_TRUE(dir_->commit(g, "a/b/c.txt", "deep").ok());
  ASSERT_TRUE(dir_->append(g, "a/b/c.log", "one").ok());  // created: through the walk
  const uint64_t walked = fsys.calls(FaultFs::Op::kOpen);
  EXPECT_EQ(dir_->read(g, "a/b/c.txt").value(), "deep");
  ASSERT_TRUE(dir_->append(g, "a/b/c.log", "two").ok());
  LogCursor cursor;
  EXPECT_EQ(dir_->read_log_since(g, "a/b/c.log", cursor).value().records.size(), 2u);
  EXPECT_EQ(dir_->read(g, "a/missing.txt").value(), "");
  if (fsys.direct_opens() > 0 && fsys.calls(FaultFs::Op::kOpen) == walked) {
    SUCCEED() << "reads and the append of an existing log took one open each";
  } else {
    // Allowed only where the kernel (or a sandbox) refuses openat2.
    EXPECT_EQ(real_fs().open_beneath(AT_FDCWD, "x", O_RDONLY), -ENOSYS);
  }
  // A symlink anywhere on the way is refused as before, with the walk's message.
  fs::create_directories(root_ / "outside");
  fs::create_directory_symlink(root_ / "outside", data_ / "a" / "link");
  Result<std::string> r = dir_->read(g, "a/link/secret.txt");
  EXPECT_EQ(r.status().code(), Errc::kUnsafePath) << r.status().message();
}

TEST_F(DataDirTest, TornTailIsDroppedAtEveryOffset) {
  {
    auto g = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->append(g, "t.log", "kept one").ok());
    ASSERT_TRUE(dir_->append(g, "t.log", "kept two").ok());
  }
  const std::string before_last = slurp(data_ / "t.log");
  {
    auto g = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->append(g, "t.log", "the last record").ok());
  }
  const std::string full = slurp(data_ / "t.log");
  const std::vector<std::string> kept = {"kept one", "kept two"};
  for (size_t cut = before_last.size(); cut < full.size(); ++cut) {
    spit(data_ / "t.log", std::string_view(full).substr(0, cut));
    open_dir();  // a fresh process: nothing cached
    auto g = ctx_->exclusive("l");
    ASSERT_EQ(dir_->read_log(g, "t.log").value(), kept) << "cut at " << cut;
    ASSERT_TRUE(dir_->append(g, "t.log", "after").ok());
    auto after = kept;
    after.push_back("after");
    ASSERT_EQ(dir_->read_log(g, "t.log").value(), after) << "cut at " << cut;
  }
  // A torn header (the crash hit the very first append) counts as an empty log.
  spit(data_ / "t.log", "KAGI");
  open_dir();
  auto g = ctx_->exclusive("l");
  EXPECT_TRUE(dir_->read_log(g, "t.log").value().empty());
  ASSERT_TRUE(dir_->append(g, "t.log", "x").ok());
  EXPECT_EQ(dir_->read_log(g, "t.log").value(), std::vector<std::string>{"x"});
}

// The records of a log written by append(), one per id ("post <id> ..."), in order.
std::vector<std::string> numbered_records(int from, int to) {
  std::vector<std::string> out;
  for (int id = from; id <= to; ++id) {
    out.push_back("post " + std::to_string(id) + " " + std::string(20 + id % 50, 'a' + id % 26));
  }
  return out;
}

// The regression: a checksum mismatch in the middle was taken for a torn tail, and the next
// append cut the log there (one flipped bit 10% into a board of 4,513 posts lost 4,050).
TEST_F(DataDirTest, AFlippedBitInTheMiddleLosesOnlyItsRecord) {
  const std::vector<std::string> all = numbered_records(1, 4513);
  {
    auto g = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->rewrite_log(g, "b.log", all).ok());
  }
  std::string bytes = slurp(data_ / "b.log");
  const size_t at = bytes.size() / 10;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  spit(data_ / "b.log", bytes);

  open_dir();  // a fresh process: nothing cached
  const uint64_t damage_before = damage_log().recorded();
  auto g = ctx_->exclusive("l");
  std::vector<std::string> read = dir_->read_log(g, "b.log").value();
  ASSERT_EQ(read.size(), all.size() - 1);
  // Exactly one record is gone, and it is the one holding the flipped byte.
  size_t lost = 0;
  while (lost < read.size() && read[lost] == all[lost]) ++lost;
  EXPECT_TRUE(std::equal(read.begin() + static_cast<std::ptrdiff_t>(lost), read.end(),
                         all.begin() + static_cast<std::ptrdiff_t>(lost) + 1));
  EXPECT_GT(lost, all.size() / 20);
  EXPECT_LT(lost, all.size() / 5);
  EXPECT_EQ(dir_->damaged_spans(), 1u);
  EXPECT_EQ(damage_log().recorded(), damage_before + 1);
  ASSERT_FALSE(damage_log().recent().empty());
  EXPECT_EQ(damage_log().recent().front().path, "b.log");
  EXPECT_LE(damage_log().recent().front().offset, at);
  EXPECT_GT(damage_log().recent().front().offset + damage_log().recent().front().length, at);

  // The append goes after the last record: nothing is cut, the damage stays on disk.
  ASSERT_TRUE(dir_->append(g, "b.log", "post 4514 new").ok());
  const std::string after = slurp(data_ / "b.log");
  EXPECT_EQ(after.substr(0, bytes.size()), bytes);
  std::vector<std::string> want = read;
  want.push_back("post 4514 new");
  EXPECT_EQ(dir_->read_log(g, "b.log").value(), want);
  LogCursor cursor;
  EXPECT_EQ(dir_->read_log_since(g, "b.log", cursor).value().records, want);
  // Reported once per process, however often it is read.
  EXPECT_EQ(dir_->damaged_spans(), 1u);

  // Every id is still unique and the newest is above every id ever stored.
  std::set<std::string> ids;
  for (const auto& r : want) ids.insert(r.substr(0, r.find(' ', 5)));
  EXPECT_EQ(ids.size(), want.size());
}

// The same through the fault-injecting filesystem: the medium returns a flipped bit in the
// middle of the log; the append must not truncate what follows it.
TEST_F(DataDirTest, AppendAfterDamageSeenOnReadTruncatesNothing) {
  const std::vector<std::string> all = numbered_records(1, 300);
  {
    auto g = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->rewrite_log(g, "f.log", all).ok());
  }
  const std::string before = slurp(data_ / "f.log");
  for (size_t at :
       {size_t{8}, size_t{12}, before.size() / 10, before.size() / 2, before.size() - 200}) {
    FaultFs& faulty = faulty_;
    open_dir(true, &faulty);  // fresh cache, so the append has to read the whole log
    faulty.flip_on_read(at, 0x01);
    auto g = ctx_->exclusive("l");
    ASSERT_TRUE(dir_->append(g, "f.log", "extra").ok()) << at;
    faulty.clear();
    const std::string now = slurp(data_ / "f.log");
    ASSERT_GE(now.size(), before.size()) << "the log was cut near offset " << at;
    ASSERT_TRUE(now.compare(0, before.size(), before) == 0) << "the log changed near " << at;
    std::vector<std::string> want = all;
    want.push_back("extra");
    EXPECT_EQ(dir_->read_log(g, "f.log").value(), want) << at;
    EXPECT_EQ(dir_->damaged_spans(), 1u) << at;
    ASSERT_TRUE(dir_->rewrite_log(g, "f.log", all).ok());
  }
}

// Damage at the very end (no intact record after it) is still a torn tail: dropped.
TEST_F(DataDirTest, DamageInTheLastRecordIsATornTail) {
  auto g = ctx_->exclusive("l");
  ASSERT_TRUE(dir_->append(g, "t.log", "one").ok());
  ASSERT_TRUE(dir_->append(g, "t.log", "two").ok());
  std::string bytes = slurp(data_ / "t.log");
  bytes[bytes.size() - 1] ^= 0x40;
  spit(data_ / "t.log", bytes);
  open_dir();
  EXPECT_EQ(dir_->read_log(g, "t.log").value(), std::vector<std::string>{"one"});
  ASSERT_TRUE(dir_->append(g, "t.log", "three").ok());
  EXPECT_EQ(dir_->read_log(g, "t.log").value(), (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(dir_->damaged_spans(), 0u);
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// Data files hold password hashes and client tags: not for other users of the host.
TEST_F(DataDirTest, CreatesFilesAndDirectoriesPrivately) {
  // The usual umask, restored however the test ends.
  struct Umask {
    mode_t old = ::umask(022);
    ~Umask() { ::umask(old); }
  } umask_022;
  for (bool group : {false, true}) {
    dir_.reset();
    fs::remove_all(root_ / "fresh");
    std::error_code ec;
    dir_ = DataDir::open(
        {.dir = (root_ / "fresh" / "data").string(), .fsync = false, .group_readable = group}, ec);
    ASSERT_TRUE(dir_) << ec.message();
    const fs::path d = root_ / "fresh" / "data";
    const mode_t file = group ? 0640 : 0600, dir = group ? 0750 : 0700;
    auto g = ctx_->exclusive("m");
    ASSERT_TRUE(dir_->commit(g, "top.dat", "x").ok());
    ASSERT_TRUE(dir_->commit(g, "a/b/c.dat", "x").ok());
    ASSERT_TRUE(dir_->append(g, "logs/one.log", "x").ok());
    ASSERT_TRUE(dir_->rewrite_log(g, "logs/two.log", {"x"}).ok());
    EXPECT_EQ(mode_of(root_ / "fresh"), dir) << group;
    EXPECT_EQ(mode_of(d), dir) << group;
    EXPECT_EQ(mode_of(d / "a"), dir) << group;
    EXPECT_EQ(mode_of(d / "a" / "b"), dir) << group;
    EXPECT_EQ(mode_of(d / "logs"), dir) << group;
    EXPECT_EQ(mode_of(d / "top.dat"), file) << group;
    EXPECT_EQ(mode_of(d / "a" / "b" / "c.dat"), file) << group;
    EXPECT_EQ(mode_of(d / "logs" / "one.log"), file) << group;
    EXPECT_EQ(mode_of(d / "logs" / "two.log"), file) << group;
  }
}

TEST_F(DataDirTest, ForeignFileIsNotALog) {
  auto g = ctx_->exclusive("l");
  ASSERT_TRUE(dir_->commit(g, "plain.txt", "hello world, not a log").ok());
  Status s = dir_->append(g, "plain.txt", "x");
  EXPECT_EQ(s.code(), Errc::kCorrupt);
  EXPECT_TRUE(contains(s.message(), "append plain.txt: not a kagi log")) << s.message();
  EXPECT_EQ(dir_->read_log(g, "plain.txt").status().code(), Errc::kCorrupt);
  EXPECT_EQ(slurp(data_ / "plain.txt"), "hello world, not a log");
}

struct Fault {
  FaultFs::Op op;
  int n;
  int error;
  const char* step;
};

TEST_F(DataDirTest, CommitFaultsLeaveTheOldContent) {
  const Fault faults[] = {
      {FaultFs::Op::kOpen, 1, EACCES, "create temp file"},
      {FaultFs::Op::kWrite, 1, ENOSPC, "write"},
      {FaultFs::Op::kFsync, 1, EIO, "fsync"},
      {FaultFs::Op::kRename, 1, ENOSPC, "rename"},
  };
  FaultFs& faulty = faulty_;
  open_dir(true, &faulty);
  auto g = ctx_->exclusive("f");
  ASSERT_TRUE(dir_->commit(g, "f.dat", "old").ok());
  for (const Fault& f : faults) {
    faulty.fail_nth(f.op, f.n, f.error);
    Status s = dir_->commit(g, "f.dat", std::string(100000, 'n'));
    ASSERT_FALSE(s.ok()) << f.step;
    EXPECT_EQ(s.code(), std::error_code(f.error, std::system_category()));
    const std::string want = "commit f.dat: " + std::string(f.step) + ": " +
                             std::error_code(f.error, std::system_category()).message();
    EXPECT_EQ(s.message(), want);
    EXPECT_EQ(slurp(data_ / "f.dat"), "old") << f.step;
    EXPECT_EQ(dir_->read(g, "f.dat").value(), "old") << f.step;
    EXPECT_TRUE(temp_files(data_).empty()) << f.step;
  }
  // The directory fsync fails after the rename: the new content is in place, and the
  // error says durability is unknown.
  faulty.fail_nth(FaultFs::Op::kFsync, 2, EIO);
  Status s = dir_->commit(g, "f.dat", "new");
  EXPECT_TRUE(contains(s.message(), "fsync directory")) << s.message();
  EXPECT_EQ(slurp(data_ / "f.dat"), "new");
  faulty.clear();
  EXPECT_TRUE(dir_->commit(g, "f.dat", "newer").ok());
}

TEST_F(DataDirTest, AppendFaultsLoseNoAcknowledgedRecord) {
  FaultFs& faulty = faulty_;
  open_dir(true, &faulty);
  auto g = ctx_->exclusive("f");
  ASSERT_TRUE(dir_->append(g, "f.log", "one").ok());
  const std::string before = slurp(data_ / "f.log");
  for (auto [op, err] : {std::pair{FaultFs::Op::kWrite, ENOSPC},
                         {FaultFs::Op::kFsync, EIO},
                         {FaultFs::Op::kPread, EIO}}) {
    open_dir(true, &faulty);  // fresh cache, so the append has to read the log
    faulty.fail_nth(op, 1, err);
    Status s = dir_->append(g, "f.log", "two");
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "append f.log: ")) << s.message();
    EXPECT_EQ(slurp(data_ / "f.log"), before);
  }
  faulty.clear();
  ASSERT_TRUE(dir_->append(g, "f.log", "two").ok());
  EXPECT_EQ(dir_->read_log(g, "f.log").value(), (std::vector<std::string>{"one", "two"}));
}

TEST_F(DataDirTest, FsyncPolicy) {
  FaultFs& counting = faulty_;
  open_dir(true, &counting);
  const uint64_t at_open = counting.calls(FaultFs::Op::kFsync);  // the journal's creation
  auto g = ctx_->exclusive("p");
  ASSERT_TRUE(dir_->commit(g, "p.dat", "x").ok());
  EXPECT_EQ(counting.calls(FaultFs::Op::kFsync) - at_open, 2u);  // the temp file, the directory
  ASSERT_TRUE(dir_->append(g, "p.log", "x").ok());               // file + directory (new log)
  ASSERT_TRUE(dir_->append(g, "p.log", "y").ok());               // file only
  EXPECT_EQ(counting.calls(FaultFs::Op::kFsync) - at_open, 5u);

  FaultFs& never = faulty2_;
  open_dir(false, &never);
  ASSERT_TRUE(dir_->commit(g, "q/p.dat", "x").ok());
  ASSERT_TRUE(dir_->append(g, "q/p.log", "x").ok());
  EXPECT_EQ(never.calls(FaultFs::Op::kFsync), 0u);
  EXPECT_FALSE(dir_->fsync_enabled());
}

TEST_F(DataDirTest, OpenCleansTempFilesOfDeadProcesses) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // its pid is now free
  const std::string dead = std::to_string(child);
  const std::string live = std::to_string(::getppid());
  fs::create_directories(data_ / "sub" / "deeper");
  spit(data_ / (".kagi-tmp-" + dead + "-0"), "torn");
  spit(data_ / "sub" / "deeper" / (".kagi-tmp-" + dead + "-7"), "torn");
  spit(data_ / "sub" / (".kagi-tmp-" + live + "-1"), "in flight");
  spit(data_ / "sub" / "keep.dat", "data");
  open_dir();
  EXPECT_EQ(dir_->cleaned_temp_files(), 2u);
  EXPECT_EQ(temp_files(data_),
            std::vector<std::string>{(data_ / "sub" / (".kagi-tmp-" + live + "-1")).string()});
  EXPECT_EQ(slurp(data_ / "sub" / "keep.dat"), "data");
}

TEST_F(DataDirTest, OpenFailsClearly) {
  std::error_code ec;
  spit(root_ / "file", "x");
  EXPECT_EQ(DataDir::open(DataOptions{.dir = (root_ / "file").string(), .fsync = true}, ec),
            nullptr);
  EXPECT_TRUE(ec);
  EXPECT_EQ(DataDir::open(DataOptions{.dir = "", .fsync = true}, ec), nullptr);
  EXPECT_TRUE(ec);
}

}  // namespace
}  // namespace kagi::store

namespace kagi::store {
namespace {

TEST_F(DataDirTest, SameFileUnderAnotherLockIsReported) {
  auto right = ctx_->exclusive("bbs/board/1");
  ASSERT_TRUE(dir_->commit(right, "bbs/1.dat", "a").ok());
  right.release();
  EXPECT_EQ(dir_->lock_mismatches(), 0u);
  auto wrong = ctx_->exclusive("bbs/board/2");
  ASSERT_TRUE(dir_->commit(wrong, "bbs/1.dat", "b").ok());  // reported, not refused
  EXPECT_EQ(dir_->read(wrong, "bbs/1.dat").value(), "b");
  EXPECT_EQ(dir_->lock_mismatches(), 2u);
}

}  // namespace
}  // namespace kagi::store
