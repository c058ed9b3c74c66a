// store/damage.hpp — damaged spans found in the middle of append-only logs, for the admin page
// and /metrics.
//
// A span of a log that holds no intact record but is followed by intact records is damage (a
// flipped bit, a bad sector, a stray write), not a torn tail: the readers skip it and keep the
// records after it, and DataDir reports it once per process (an error log line naming the file
// and offset, and an entry here). kagi-fsck finds the same spans and can rewrite the log
// without them (docs/STORAGE.md).
//
// One ring per process (every DataDir of the process records into it): the admin app's
// statistics publisher shows it with the lock events. Bounded: the oldest entry is dropped
// when full; recorded() keeps the total.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace kagi::store {

struct DamageEvent {
  std::chrono::system_clock::time_point time;
  std::string path;     // the log, relative to data.dir
  uint64_t offset = 0;  // where the damaged span starts in the file
  uint64_t length = 0;  // its bytes (skipped; the records after it are kept)
};

// Thread-safe.
class DamageLog {
 public:
  explicit DamageLog(size_t capacity = 32) : capacity_(capacity) {}
  DamageLog(const DamageLog&) = delete;
  DamageLog& operator=(const DamageLog&) = delete;

  // Never throws: an event that cannot be stored (out of memory) is counted but dropped.
  void record(DamageEvent event) noexcept;
  // Newest first.
  std::vector<DamageEvent> recent() const;
  // Every span ever recorded, including those the ring has dropped.
  uint64_t recorded() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<DamageEvent> ring_;  // guarded by mu_; newest at the front
  uint64_t recorded_ = 0;         // guarded by mu_
};

// This process's damage reports.
DamageLog& damage_log();

}  // namespace kagi::store
