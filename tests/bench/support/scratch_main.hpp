// tests/bench/support/scratch_main.hpp — what a Google Benchmark program over files shares: one
// scratch directory for the process (under KAGI_BENCH_DIR, which picks the filesystem; default
// /tmp), and a main that runs the benchmarks with the CheckedReporter and removes the directory.
//
//   const std::filesystem::path& dir = kagi::bench::scratch_dir("kagi-store-bench");
//   int main(int argc, char** argv) { return kagi::bench::run_in_scratch(argc, argv); }
#pragma once

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <kagi/util/log.hpp>
#include "support/checked_reporter.hpp"

namespace kagi::bench {

namespace detail {
inline std::filesystem::path& scratch_path() {
  static std::filesystem::path path;
  return path;
}
}  // namespace detail

// The process's scratch directory, made at the first call (`prefix` names it then); aborts if
// it cannot be made.
inline const std::filesystem::path& scratch_dir(std::string_view prefix) {
  std::filesystem::path& path = detail::scratch_path();
  if (path.empty()) {
    const char* base = std::getenv("KAGI_BENCH_DIR");
    std::string tmpl =
        std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    path = tmpl;
  }
  return path;
}

// Runs the benchmarks the command line asks for (kagi's log at warnings only), then removes the
// scratch directory if one was made; the exit code is checked_exit_code's.
inline int run_in_scratch(int argc, char** argv) {
  util::set_log_level(util::LogLevel::kWarn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CheckedReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (!detail::scratch_path().empty()) {
    std::error_code ec;
    std::filesystem::remove_all(detail::scratch_path(), ec);
  }
  return checked_exit_code(reporter);
}

}  // namespace kagi::bench
