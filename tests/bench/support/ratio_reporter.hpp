// tests/bench/support/ratio_reporter.hpp — a CheckedReporter that remembers each benchmark's
// time, so that main() can print ratios against a baseline of the same run.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/checked_reporter.hpp"

namespace kagi::bench {

// With --benchmark_repetitions, the fastest repetition is the best estimate on a shared,
// noisy machine (interference only ever adds time): BENCHMARK(...)->ComputeStatistics("min",
// min_of), and RatioReporter prefers it.
inline double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Records each benchmark's time per iteration (with repetitions: the min if computed, else the
// median) so main() can print the ratios.
class RatioReporter : public CheckedReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const std::string name = r.run_name.function_name;
      if (r.run_type == Run::RT_Iteration && !medians_.contains(name)) {
        ns_[name] = r.GetAdjustedRealTime();
      } else if (r.run_type == Run::RT_Aggregate &&
                 (r.aggregate_name == "min" ||
                  (r.aggregate_name == "median" && !mins_.contains(name)))) {
        ns_[name] = r.GetAdjustedRealTime();
        medians_.insert(name);
        if (r.aggregate_name == "min") mins_.insert(name);
      }
    }
    CheckedReporter::ReportRuns(runs);
  }
  double ns(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> ns_;
  std::set<std::string> medians_;
  std::set<std::string> mins_;
};

}  // namespace kagi::bench
