// store/detail/damage_report.hpp — reporting damaged spans found in the middle of logs, once
// per span and process: an error log line naming the file and offset (and kagi-fsck), a
// count (DataDir::damaged_spans()) and an entry in store::damage_log().
//
// Readers and appenders meet the same span again on every call; reporting it each time would
// bury the one line that matters.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <kagi/store/detail/log_format.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::store::detail {

// Thread-safe.
class DamageReporter {
 public:
  // `data_dir`: the directory named in the log line's kagi-fsck advice.
  explicit DamageReporter(std::string data_dir) : data_dir_(std::move(data_dir)) {}

  // Reports each span of `spans` (offsets relative to file offset `from`) of the log `path`,
  // stat'ed as `st`, that this reporter has not reported before. `op` names the call that
  // found it. Bounded: the memory of reported spans is cleared when full, which at worst
  // reports a span again.
  void report(std::string_view op, std::string_view path, const struct stat& st, uint64_t from,
              const std::vector<Damage>& spans) KAGI_EXCLUDES(mu_);

  // Spans reported so far.
  uint64_t reported() const { return reported_count_.load(std::memory_order_relaxed); }

 private:
  // True the first time the span at `offset` of the file (dev, ino) is seen.
  bool first_sighting(const struct stat& st, uint64_t offset) KAGI_EXCLUDES(mu_);

  const std::string data_dir_;
  util::Mutex mu_;
  std::unordered_set<std::string> seen_ KAGI_GUARDED_BY(mu_);  // "dev:ino:offset"
  std::atomic<uint64_t> reported_count_{0};
};

}  // namespace kagi::store::detail
