// tests/bench/support/checked_reporter.hpp — a console reporter that remembers failures.
//
// Google Benchmark's exit code ignores State::SkipWithError, so a smoke run whose every
// benchmark failed would still pass. CheckedReporter counts the runs it saw and the ones that
// reported an error; a benchmark's main() returns checked_exit_code(reporter) so ctest fails
// when a benchmark errored or none ran.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

namespace kagi::bench {

class CheckedReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    // Every run counts, aggregates too: with --benchmark_report_aggregates_only the
    // reporter sees only the aggregates of repeated benchmarks.
    for (const Run& r : runs) {
      ++runs_;
      if (r.error_occurred) {
        ++errors_;
        std::fprintf(stderr, "benchmark %s failed: %s\n", r.benchmark_name().c_str(),
                     r.error_message.c_str());
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  int runs() const { return runs_; }
  int errors() const { return errors_; }

 private:
  int runs_ = 0;
  int errors_ = 0;
};

// 0 when at least one benchmark ran and none reported an error; 1 (with the reason) otherwise.
inline int checked_exit_code(const CheckedReporter& reporter) {
  if (reporter.runs() == 0) {
    std::fprintf(stderr, "no benchmark ran (check --benchmark_filter)\n");
    return 1;
  }
  if (reporter.errors() > 0) {
    std::fprintf(stderr, "%d of %d benchmark runs failed\n", reporter.errors(), reporter.runs());
    return 1;
  }
  return 0;
}

}  // namespace kagi::bench
