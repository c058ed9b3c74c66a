// Lock layer benchmarks: the cost of ctx.locks against the bare system calls it wraps, the
// system-call-free shared path, and contended throughput. Prints the ratios the lock issue
// sets goals for at the end (docs/LOCKING.md has the numbers and the command).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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
  char tmpl[] = "/tmp/kagi-lock-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  g_dir = tmpl;
  g_service = make_service(g_dir + "/locks", true);
  g_service_noreg = make_service(g_dir + "/locks-noreg", false);
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
  g_service.reset();
  g_service_noreg.reset();
  std::error_code ec;
  std::filesystem::remove_all(g_dir, ec);
  return kagi::bench::checked_exit_code(reporter);
}
