// The postgres lock backend against raw libpq on the same server, in the same run: what kagi
// adds to the two statements an advisory lock costs, what a set in one round trip saves, and
// throughput with eight threads on one name and on eight. Starts its own server
// (tests/support/pg_cluster.hpp) on a unix socket; docs/BENCHMARKS.md has the numbers and the
// command.
#include <benchmark/benchmark.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <kagi/lock/lock_service.hpp>
#include "../../support/pg_cluster.hpp"
#include "support/ratio_reporter.hpp"

namespace {

using kagi::lock::LockOptions;
using kagi::lock::LockService;

std::string g_dsn;
std::string g_dir;
std::unique_ptr<LockService> g_service;

using kagi::bench::min_of;

std::unique_ptr<kagi::lock::LockContext> request() {
  return g_service->context(
      {.request_id = "bench", .method = "GET", .path = "/bench", .client_address = "::1"});
}

// The floor: the two statements on one blocking libpq connection, nothing else.
void BM_RawLibpqLockUnlock(benchmark::State& state) {
  PGconn* conn = PQconnectdb(g_dsn.c_str());
  if (PQstatus(conn) != CONNECTION_OK) state.SkipWithError(PQerrorMessage(conn));
  for (auto _ : state) {
    PGresult* a = PQexec(conn, "SELECT pg_advisory_lock(4242)");
    PGresult* b = PQexec(conn, "SELECT pg_advisory_unlock(4242)");
    if (PQresultStatus(a) != PGRES_TUPLES_OK || PQresultStatus(b) != PGRES_TUPLES_OK) {
      state.SkipWithError("raw lock failed");
    }
    PQclear(a);
    PQclear(b);
  }
  PQfinish(conn);
}
BENCHMARK(BM_RawLibpqLockUnlock)->ComputeStatistics("min", min_of);

// ctx.locks.exclusive + release on a context that keeps its connection (a request taking
// one lock after another).
void BM_KagiLockUnlock(benchmark::State& state) {
  auto ctx = request();
  for (auto _ : state) {
    auto g = ctx->exclusive("bench/one");
    g.release();
  }
}
BENCHMARK(BM_KagiLockUnlock)->ComputeStatistics("min", min_of);

// A whole request with one lock: context, connection from the pool, lock, unlock, connection
// back.
void BM_KagiRequestWithOneLock(benchmark::State& state) {
  for (auto _ : state) {
    auto ctx = request();
    auto g = ctx->exclusive("bench/one");
  }
}
BENCHMARK(BM_KagiRequestWithOneLock)->ComputeStatistics("min", min_of);

const std::string kFour[] = {"bench/set/1", "bench/set/2", "bench/set/3", "bench/set/4"};

// Four names as one set: one round trip to take them, four to give them back.
void BM_KagiSetOf4(benchmark::State& state) {
  auto ctx = request();
  for (auto _ : state) {
    { auto guards = ctx->exclusive_set(kFour); }
    ctx->end_request();  // the connection back to the pool, as at the end of a request
  }
}
BENCHMARK(BM_KagiSetOf4)->ComputeStatistics("min", min_of);

// The same four names one by one (in canonical order): four round trips to take them.
void BM_Kagi4Singles(benchmark::State& state) {
  auto ctx = request();
  for (auto _ : state) {
    {
      auto a = ctx->exclusive(kFour[0]);
      auto b = ctx->exclusive(kFour[1]);
      auto c = ctx->exclusive(kFour[2]);
      auto d = ctx->exclusive(kFour[3]);
    }
    ctx->end_request();
  }
}
BENCHMARK(BM_Kagi4Singles)->ComputeStatistics("min", min_of);

// Requests with one lock each from 8 threads, on 1 name (all queue on it) or 8 names.
void BM_KagiContended(benchmark::State& state) {
  const std::string name = "bench/hot/" + std::to_string(state.thread_index() % state.range(0));
  for (auto _ : state) {
    auto ctx = request();
    auto g = ctx->exclusive(name);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KagiContended)->Arg(1)->Arg(8)->Threads(8)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  auto* pg = kagi::test_support::PgCluster::shared(&why);
  if (!pg) {
    std::fprintf(stderr, "bench_lock_postgres: no PostgreSQL server: %s\n", why.c_str());
    return 1;
  }
  g_dsn = pg->dsn();
  char tmpl[] = "/tmp/kagi-bench-pg-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  g_dir = tmpl;
  LockOptions options;
  options.backend = "postgres";
  options.dir = g_dir;
  options.timeout = std::chrono::seconds(30);
  options.postgres.dsn = g_dsn;
  options.postgres_pool = 16;
  g_service = LockService::create(options);

  benchmark::Initialize(&argc, argv);
  kagi::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const double raw = reporter.ns("BM_RawLibpqLockUnlock");
  const double kagi = reporter.ns("BM_KagiLockUnlock");
  const double request_one = reporter.ns("BM_KagiRequestWithOneLock");
  const double set4 = reporter.ns("BM_KagiSetOf4");
  const double singles4 = reporter.ns("BM_Kagi4Singles");
  if (raw > 0 && kagi > 0) {
    std::printf("\nsummary (postgres backend; fastest repetition if repeated):\n");
    std::printf("  kagi lock+unlock / raw libpq lock+unlock     = %.2fx  (goal <= 1.1x)\n",
                kagi / raw);
    if (request_one > 0) {
      std::printf("  a request with one lock / raw libpq pair      = %.2fx\n", request_one / raw);
    }
    if (set4 > 0 && singles4 > 0) {
      std::printf("  set of 4 in one round trip / 4 single locks   = %.2fx\n", set4 / singles4);
    }
  }
  g_service.reset();
  std::error_code ec;
  std::filesystem::remove_all(g_dir, ec);
  return kagi::bench::checked_exit_code(reporter);
}
