// Lock layer benchmarks: the cost of ctx.locks against the bare system calls it wraps, the
// system-call-free shared path, and contended throughput. Prints the ratios the lock issue
// sets goals for at the end (docs/LOCKING.md has the numbers and the command).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <kagi/lock/lock_service.hpp>
#include "support/ratio_reporter.hpp"

namespace {

using kagi::lock::HolderInfo;
using kagi::lock::LockOptions;
using kagi::lock::LockService;

std::string g_dir;

using kagi::bench::min_of;
std::unique_ptr<LockService> g_service;        // registry on (the default)
std::unique_ptr<LockService> g_service_noreg;  // registry off: isolates its cost
std::unique_ptr<LockService> g_dir_service;    // the dir backend, on the same filesystem

HolderInfo who() {
  return {.request_id = "bench", .method = "GET", .path = "/bench", .client_address = "::1"};
}

std::unique_ptr<LockService> make_service(const std::string& dir, bool registry) {
  LockOptions options;
  options.dir = dir;
  options.timeout = std::chrono::seconds(30);
  options.registry = registry;
  return LockService::create(options);
}

void BM_BareOpenFlockClose(benchmark::State& state) {
  const std::string path = g_dir + "/bare-open.lock";
  for (auto _ : state) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::flock(fd, LOCK_UN) != 0) {
      state.SkipWithError("open/flock failed");
    }
    if (fd >= 0) ::close(fd);
  }
}
BENCHMARK(BM_BareOpenFlockClose)->ComputeStatistics("min", min_of);

void BM_BareFlockOpenFd(benchmark::State& state) {
  const std::string path = g_dir + "/bare-fd.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) state.SkipWithError("open failed");
  for (auto _ : state) {
    if (::flock(fd, LOCK_EX) != 0 || ::flock(fd, LOCK_UN) != 0) state.SkipWithError("flock failed");
  }
  ::close(fd);
}
BENCHMARK(BM_BareFlockOpenFd)->ComputeStatistics("min", min_of);

void BM_BareOfdOpenFd(benchmark::State& state) {
  const std::string path = g_dir + "/bare-ofd.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  struct flock fl {};
  fl.l_whence = SEEK_SET;
  fl.l_len = 1;
  if (fd < 0) state.SkipWithError("open failed");
  for (auto _ : state) {
    fl.l_type = F_WRLCK;
    const int locked = ::fcntl(fd, F_OFD_SETLK, &fl);
    fl.l_type = F_UNLCK;
    if (locked != 0 || ::fcntl(fd, F_OFD_SETLK, &fl) != 0) state.SkipWithError("fcntl failed");
  }
  ::close(fd);
}
BENCHMARK(BM_BareOfdOpenFd)->ComputeStatistics("min", min_of);

// Uncontended exclusive acquire + release through a request's lock context.
void BM_ContextExclusive(benchmark::State& state) {
  auto ctx = g_service->context(who());
  for (auto _ : state) {
    auto guard = ctx->exclusive("bench/board/1");
    if (!guard) state.SkipWithError("lock not held");
    benchmark::DoNotOptimize(guard);
  }
}
BENCHMARK(BM_ContextExclusive)->ComputeStatistics("min", min_of);

void BM_ContextExclusiveNoRegistry(benchmark::State& state) {
  auto ctx = g_service_noreg->context(who());
  for (auto _ : state) {
    auto guard = ctx->exclusive("bench/board/2");
    if (!guard) state.SkipWithError("lock not held");
    benchmark::DoNotOptimize(guard);
  }
}
BENCHMARK(BM_ContextExclusiveNoRegistry)->ComputeStatistics("min", min_of);

// The dir backend, uncontended, through a request's lock context (registry on, as above): its
// lock directory, owner record and fencing counter on the same filesystem as the bare rows.
void BM_DirContextExclusive(benchmark::State& state) {
  auto ctx = g_dir_service->context(who());
  for (auto _ : state) {
    auto guard = ctx->exclusive("bench/board/1");
    if (!guard) state.SkipWithError("lock not held");
    benchmark::DoNotOptimize(guard);
  }
}
BENCHMARK(BM_DirContextExclusive)->ComputeStatistics("min", min_of);

// The seeds' lock-file mechanisms, bare, on the same filesystem (docs/LOCKING.md compares
// what each guarantees). Each is one uncontended lock + unlock.
void BM_BareMkdirRmdir(benchmark::State& state) {  // 001, 002: mkdir
  const std::string path = g_dir + "/seed-mkdir.lock";
  for (auto _ : state) {
    if (::mkdir(path.c_str(), 0700) != 0 || ::rmdir(path.c_str()) != 0) {
      state.SkipWithError("mkdir/rmdir failed");
    }
  }
}
BENCHMARK(BM_BareMkdirRmdir)->ComputeStatistics("min", min_of);

// The least a lock directory with an owner record costs: mkdir, the record (a symlink, one
// call), and both removed.
void BM_BareMkdirRecordRmdir(benchmark::State& state) {
  const std::string path = g_dir + "/seed-mkdir-record.lock";
  const std::string record = path + "/owner";
  const std::string text(160, 'r');  // about the size of kagi's record
  for (auto _ : state) {
    if (::mkdir(path.c_str(), 0700) != 0 || ::symlink(text.c_str(), record.c_str()) != 0 ||
        ::unlink(record.c_str()) != 0 || ::rmdir(path.c_str()) != 0) {
      state.SkipWithError("mkdir/symlink/unlink/rmdir failed");
    }
  }
}
BENCHMARK(BM_BareMkdirRecordRmdir)->ComputeStatistics("min", min_of);

// dir's own steps, bare: the directory made whole and renamed into place, then removed
// (mkdir, symlink, rename, unlink, rmdir)...
void BM_StepStagePublish(benchmark::State& state) {
  const std::string stage = g_dir + "/step-stage", lock = g_dir + "/step.d";
  const std::string text(160, 'r');
  for (auto _ : state) {
    if (::mkdir(stage.c_str(), 0700) != 0 || ::symlink(text.c_str(), (stage + "/r").c_str()) != 0 ||
        ::rename(stage.c_str(), lock.c_str()) != 0 || ::unlink((lock + "/r").c_str()) != 0 ||
        ::rmdir(lock.c_str()) != 0) {
      state.SkipWithError("stage/publish failed");
    }
  }
}
BENCHMARK(BM_StepStagePublish)->ComputeStatistics("min", min_of);

// ...and the fencing counter: one byte appended (open, write, fstat, close).
void BM_StepCounterAppend(benchmark::State& state) {
  const std::string path = g_dir + "/step.n";
  struct stat st {};
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, "+", 1) != 1 || ::fstat(fd, &st) != 0) {
      state.SkipWithError("counter append failed");
    }
    ::close(fd);
  }
}
BENCHMARK(BM_StepCounterAppend)->ComputeStatistics("min", min_of);

void BM_SeedSymlink(benchmark::State& state) {  // 002: symlink($$, lockfile)
  const std::string path = g_dir + "/seed-symlink.lock";
  for (auto _ : state) {
    if (::symlink("12345", path.c_str()) != 0 || ::unlink(path.c_str()) != 0) {
      state.SkipWithError("symlink/unlink failed");
    }
  }
}
BENCHMARK(BM_SeedSymlink)->ComputeStatistics("min", min_of);

void BM_SeedRename(benchmark::State& state) {  // 002: rename(lockfile, lockfile2) and back
  const std::string a = g_dir + "/seed-rename.lock", b = a + ".held";
  const int fd = ::open(a.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  for (auto _ : state) {
    if (::rename(a.c_str(), b.c_str()) != 0 || ::rename(b.c_str(), a.c_str()) != 0) {
      state.SkipWithError("rename failed");
    }
  }
}
BENCHMARK(BM_SeedRename)->ComputeStatistics("min", min_of);

void BM_SeedOpenExcl(benchmark::State& state) {  // open(O_CREAT | O_EXCL) lock file
  const std::string path = g_dir + "/seed-excl.lock";
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ::close(fd) != 0 || ::unlink(path.c_str()) != 0) {
      state.SkipWithError("open(O_EXCL)/unlink failed");
    }
  }
}
BENCHMARK(BM_SeedOpenExcl)->ComputeStatistics("min", min_of);

// 000, TOP-LOCK: append "id<>time" to the lock file, read it back, the first line wins; the
// winner deletes the file when done.
void BM_SeedTopLock(benchmark::State& state) {
  const std::string path = g_dir + "/seed-top.lock";
  const std::string line = "1234567890123456789012345678901234<>1700000000<>\n";
  char buf[256];
  for (auto _ : state) {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    if (fd >= 0) ::close(fd);
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ok = ok && fd >= 0 && ::read(fd, buf, sizeof buf) > 0 && std::memcmp(buf, line.data(), 10) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok || ::unlink(path.c_str()) != 0) state.SkipWithError("TOP-LOCK failed");
  }
}
BENCHMARK(BM_SeedTopLock)->ComputeStatistics("min", min_of);

// A whole request: a new context, one exclusive lock, the end of the request.
void BM_RequestWithOneLock(benchmark::State& state) {
  for (auto _ : state) {
    auto ctx = g_service->context(who());
    auto guard = ctx->exclusive("bench/board/3");
    if (!guard) state.SkipWithError("lock not held");
    benchmark::DoNotOptimize(guard);
  }
}
BENCHMARK(BM_RequestWithOneLock)->ComputeStatistics("min", min_of);

// A shared acquire of a name another request of the process already holds shared: no
// system call (one F_OFD_GETLK probe per batch of 32).
void BM_SharedAlreadyHeldShared(benchmark::State& state) {
  auto holder = g_service->context(who());
  auto held = holder->shared("bench/board/4");
  auto ctx = g_service->context(who());
  for (auto _ : state) {
    auto guard = ctx->shared("bench/board/4");
    if (!guard) state.SkipWithError("lock not held");
    benchmark::DoNotOptimize(guard);
  }
}
BENCHMARK(BM_SharedAlreadyHeldShared)->ComputeStatistics("min", min_of);

// Contended throughput: every thread takes an exclusive lock on one of `names` names.
void BM_Contended(benchmark::State& state) {
  const int names = static_cast<int>(state.range(0));
  auto ctx = g_service->context(who());
  const std::string name = "bench/hot/" + std::to_string(state.thread_index() % names);
  for (auto _ : state) {
    auto guard = ctx->exclusive(name);
    if (!guard) state.SkipWithError("lock not held");
    benchmark::DoNotOptimize(guard);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Contended)->Arg(1)->Arg(8)->Threads(2)->Threads(8)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // KAGI_BENCH_DIR picks the filesystem (default /tmp): the dir rows compare metadata calls,
  // whose cost is the filesystem's (docs/BENCHMARKS.md runs them on disk and on tmpfs).
  const char* parent = std::getenv("KAGI_BENCH_DIR");
  std::string tmpl = std::string(parent && *parent ? parent : "/tmp") + "/kagi-lock-bench-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return 1;
  g_dir = tmpl;
  g_service = make_service(g_dir + "/locks", true);
  g_service_noreg = make_service(g_dir + "/locks-noreg", false);
  {
    LockOptions options;
    options.backend = "dir";
    options.dir = g_dir + "/locks-dir";
    options.timeout = std::chrono::seconds(30);
    g_dir_service = LockService::create(options);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kagi::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const double bare_fd = reporter.ns("BM_BareFlockOpenFd");
  const double ofd_fd = reporter.ns("BM_BareOfdOpenFd");
  const double open_close = reporter.ns("BM_BareOpenFlockClose");
  const double ctx = reporter.ns("BM_ContextExclusive");
  const double noreg = reporter.ns("BM_ContextExclusiveNoRegistry");
  const double shared = reporter.ns("BM_SharedAlreadyHeldShared");
  if (bare_fd > 0 && ctx > 0) {
    std::printf("\nsummary (time per acquire+release; fastest repetition if repeated):\n");
    std::printf("  ctx.locks exclusive / bare flock on open fd   = %.2fx  (goal <= 1.2x)\n",
                ctx / bare_fd);
    if (ofd_fd > 0)
      std::printf("  ctx.locks exclusive / bare OFD fcntl on open fd = %.2fx\n", ctx / ofd_fd);
    if (open_close > 0) {
      std::printf("  ctx.locks exclusive / bare open+flock+close    = %.2fx\n", ctx / open_close);
    }
    if (noreg > 0)
      std::printf("  status registry cost per acquire              = %.0f ns\n", ctx - noreg);
    if (shared > 0) {
      std::printf("  shared, already held shared in the process    = %.0f ns (%.2fx bare flock)\n",
                  shared, shared / bare_fd);
    }
  }
  const double mkdir_rmdir = reporter.ns("BM_BareMkdirRmdir");
  const double floor = reporter.ns("BM_BareMkdirRecordRmdir");
  const double dir = reporter.ns("BM_DirContextExclusive");
  if (mkdir_rmdir > 0 && dir > 0) {
    std::printf("\ndir backend (same filesystem, same run):\n");
    std::printf("  dir exclusive / bare mkdir+rmdir              = %.2fx  (goal <= 1.3x)\n",
                dir / mkdir_rmdir);
    if (floor > 0) {
      std::printf(
          "  dir exclusive / mkdir+record+unlink+rmdir     = %.2fx  (the floor with a record)\n",
          dir / floor);
    }
    if (ctx > 0)
      std::printf("  dir exclusive / local exclusive               = %.2fx\n", dir / ctx);
    std::printf("  profile: stage+publish %.1f us + counter %.1f us of %.1f us\n",
                reporter.ns("BM_StepStagePublish") / 1e3, reporter.ns("BM_StepCounterAppend") / 1e3,
                dir / 1e3);
  }
  g_service.reset();
  g_service_noreg.reset();
  g_dir_service.reset();
  std::error_code ec;
  std::filesystem::remove_all(g_dir, ec);
  return kagi::bench::checked_exit_code(reporter);
}
