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
#include <string>

#include <kagi/util/recent_ring.hpp>

namespace kagi::store {

struct DamageEvent {
  std::chrono::system_clock::time_point time;
  std::string path;     // the log, relative to data.dir
  uint64_t offset = 0;  // where the damaged span starts in the file
  uint64_t length = 0;  // its bytes (skipped; the records after it are kept)
};

// Thread-safe; the capacity is 32 spans.
class DamageLog : public util::RecentRing<DamageEvent> {
 public:
  explicit DamageLog(size_t capacity = 32) : RecentRing(capacity) {}
};

// This process's damage reports.
DamageLog& damage_log();

}  // namespace kagi::store
