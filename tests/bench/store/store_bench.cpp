// Cost of the storage layer next to the bare system calls it wraps, in one run.
//
//   BM_Commit/<bytes>/<fsync>        DataDir::commit under a held exclusive guard
//   BM_BareReplace/<bytes>/<fsync>   the same protocol by hand: open temp, write, [fsync],
//                                    close, rename, [fsync dir] — the goal is commit ≤ 1.1×
//   BM_Append/<fsync>                DataDir::append of a 100-byte record
//   BM_BareAppend/<fsync>            write(O_APPEND) of 100 bytes, [fsync]
//   BM_PostLog                       a post's log work without fsync: take an exclusive lock,
//                                    read what is new (read_log_since), append a 100-byte
//                                    record, release
//   BM_BareLockedAppend              the same by hand: flock(LOCK_EX), write(O_APPEND) of the
//                                    framed bytes, flock(LOCK_UN), on descriptors kept open
//   BM_BareStatAppend/<times>        statx of a log's path, then write(O_APPEND) of 108 bytes:
//                                    asking the file's times (1) or not (0). Since Linux 6.13 a
//                                    stat that asks them makes the next write dirty the inode
//                                    (store/fs.hpp), so a writer asks none
//   BM_GroupRound8/<syncfs_min_files> one group commit round over 8 logs without the journal
//                                    (data.journal = false): a record appended to
//                                    each in one DurableScope, then its wait (an fsync per log
//                                    with 0, one syncfs with 3: with no dirty-data limit, and
//                                    after a sync, so that what earlier runs left dirty is not
//                                    the round's to write)
//   BM_GroupRound8Journal            the same round through the journal (data.journal): the
//                                    bytes each log gained written to one file, one fdatasync
//   BM_BareFlush                     one device flush and nothing else: 8 records' bytes
//                                    written over blocks a preallocated file already holds,
//                                    then fdatasync (no size or block change, so no
//                                    filesystem journal commit). What any durable round pays
//                                    at least: a write-ahead journal's flush
//
// Numbers and the command that produced them: docs/STORAGE.md.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/durable_scope.hpp>
#include <kagi/util/log.hpp>
#include "support/scratch_main.hpp"

namespace {

namespace fs = std::filesystem;
using kagi::store::DataDir;
using kagi::store::DataOptions;

// One scratch directory per process; main() removes it.
const fs::path& scratch() { return kagi::bench::scratch_dir("kagi-store-bench"); }

struct Fixture {
  std::unique_ptr<kagi::lock::LockService> service;
  std::unique_ptr<kagi::lock::LockContext> ctx;
  std::unique_ptr<DataDir> data;

  explicit Fixture(bool fsync, size_t syncfs_min_files = 3, bool journal = false) {
    kagi::lock::LockOptions options;
    options.dir = (scratch() / "locks").string();
    service = kagi::lock::LockService::create(options);
    kagi::lock::HolderInfo who;
    who.request_id = "bench";
    ctx = service->context(who);
    std::error_code ec;
    data = DataDir::open(DataOptions{.dir = (scratch() / "data").string(),
                                     .fsync = fsync,
                                     .syncfs_min_files = syncfs_min_files,
                                     .syncfs_max_dirty_kb = 0,
                                     .journal = journal},
                         ec);
    if (!data) std::abort();
  }
};

void BM_Commit(benchmark::State& state) {
  const std::string bytes(static_cast<size_t>(state.range(0)), 'x');
  Fixture f(state.range(1) != 0);
  auto guard = f.ctx->exclusive("bench/commit");
  for (auto _ : state) {
    if (!f.data->commit(guard, "commit.dat", bytes).ok()) state.SkipWithError("commit failed");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_BareReplace(benchmark::State& state) {
  const std::string bytes(static_cast<size_t>(state.range(0)), 'x');
  const bool sync = state.range(1) != 0;
  fs::create_directories(scratch() / "bare");
  const std::string temp = (scratch() / "bare" / "replace.tmp").string();
  const std::string target = (scratch() / "bare" / "replace.dat").string();
  const int dir = ::open((scratch() / "bare").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (auto _ : state) {
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()) ||
        (sync && ::fsync(fd) != 0) || ::close(fd) != 0 ||
        ::rename(temp.c_str(), target.c_str()) != 0 || (sync && ::fsync(dir) != 0)) {
      state.SkipWithError("bare replace failed");
    }
  }
  ::close(dir);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Append(benchmark::State& state) {
  const std::string record(100, 'r');
  Fixture f(state.range(0) != 0);
  auto guard = f.ctx->exclusive("bench/append");
  const std::string path = "append-" + std::to_string(state.range(0)) + ".log";
  for (auto _ : state) {
    if (!f.data->append(guard, path, record).ok()) state.SkipWithError("append failed");
  }
}

void BM_BareAppend(benchmark::State& state) {
  const std::string record(108, 'r');  // the same bytes as a framed 100-byte record
  const bool sync = state.range(0) != 0;
  fs::create_directories(scratch() / "bare");
  const std::string path =
      (scratch() / "bare" / ("append-" + std::to_string(state.range(0)) + ".log")).string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  for (auto _ : state) {
    if (::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size()) ||
        (sync && ::fsync(fd) != 0)) {
      state.SkipWithError("bare append failed");
    }
  }
  ::close(fd);
}

void BM_PostLog(benchmark::State& state) {
  const std::string record(100, 'r');
  Fixture f(false);
  kagi::store::LogCursor cursor;
  for (auto _ : state) {
    auto guard = f.ctx->exclusive("bench/post");
    if (!f.data->read_log_since(guard, "post.log", cursor).ok() ||
        !f.data->append(guard, "post.log", record).ok()) {
      state.SkipWithError("read or append failed");
    }
  }
}

void BM_BareLockedAppend(benchmark::State& state) {
  const std::string record(108, 'r');  // the same bytes as a framed 100-byte record
  fs::create_directories(scratch() / "bare");
  const int lock =
      ::open((scratch() / "bare" / "post.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  const int fd = ::open((scratch() / "bare" / "post.log").c_str(),
                        O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  for (auto _ : state) {
    if (::flock(lock, LOCK_EX) != 0 ||
        ::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size()) ||
        ::flock(lock, LOCK_UN) != 0) {
      state.SkipWithError("bare locked append failed");
    }
  }
  ::close(fd);
  ::close(lock);
}

void BM_BareStatAppend(benchmark::State& state) {
  const std::string record(108, 'r');
  const unsigned times = STATX_ATIME | STATX_MTIME | STATX_CTIME;
  const unsigned mask = (STATX_BASIC_STATS | STATX_BTIME) & ~(state.range(0) != 0 ? 0u : times);
  fs::create_directories(scratch() / "bare");
  const std::string path =
      (scratch() / "bare" / ("stat-append-" + std::to_string(state.range(0)) + ".log")).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  struct statx sx {};
  for (auto _ : state) {
    if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, mask, &sx) != 0 ||
        ::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size())) {
      state.SkipWithError("stat + append failed");
    }
  }
  ::close(fd);
}

// One round over 8 logs; `journal`: through this process's journal (one fdatasync).
void group_round8(benchmark::State& state, size_t syncfs_min_files, bool journal) {
  const std::string record(100, 'r');
  Fixture f(true, syncfs_min_files, journal);
  ::sync();
  for (auto _ : state) {
    kagi::store::DurableScope durable;
    for (int log = 0; log < 8; ++log) {
      const std::string name = "group-" + std::to_string(log);
      auto guard = f.ctx->exclusive("bench/" + name);
      if (!f.data->append(guard, name + ".log", record).ok()) state.SkipWithError("append failed");
    }
    f.ctx->end_request();
    if (!durable.wait().ok()) state.SkipWithError("flush failed");
  }
}

void BM_GroupRound8(benchmark::State& state) {
  group_round8(state, static_cast<size_t>(state.range(0)), false);
}

void BM_GroupRound8Journal(benchmark::State& state) { group_round8(state, 3, true); }

void BM_BareFlush(benchmark::State& state) {
  const std::string records(8 * 108, 'r');  // what BM_GroupRound8 writes, framed
  const std::string block(4096, 'z');
  constexpr int kBlocks = 4096;  // 16 MiB, written for real (fallocate's blocks are unwritten)
  fs::create_directories(scratch() / "bare");
  const int fd = ::open((scratch() / "bare" / "journal").c_str(),
                        O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  for (int i = 0; i < kBlocks; ++i) {
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) {
      state.SkipWithError("preallocating the journal failed");
    }
  }
  if (::fsync(fd) != 0) state.SkipWithError("fsync failed");
  ::sync();
  off_t at = 0;
  for (auto _ : state) {
    if (::pwrite(fd, records.data(), records.size(), at) != static_cast<ssize_t>(records.size()) ||
        ::fdatasync(fd) != 0) {
      state.SkipWithError("overwrite + fdatasync failed");
    }
    at = (at + 4096) % (off_t{kBlocks} * 4096);
  }
  ::close(fd);
}

// {bytes, fsync}
BENCHMARK(BM_Commit)->ArgsProduct({{4096, 256 * 1024}, {0, 1}})->UseRealTime();
BENCHMARK(BM_BareReplace)->ArgsProduct({{4096, 256 * 1024}, {0, 1}})->UseRealTime();
BENCHMARK(BM_Append)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_BareAppend)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_PostLog)->UseRealTime();
BENCHMARK(BM_BareLockedAppend)->UseRealTime();
BENCHMARK(BM_BareStatAppend)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_GroupRound8)->Arg(0)->Arg(3)->UseRealTime();
BENCHMARK(BM_GroupRound8Journal)->UseRealTime();
BENCHMARK(BM_BareFlush)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return kagi::bench::run_in_scratch(argc, argv); }
