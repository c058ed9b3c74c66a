// lock/events.hpp — the recent notable lock events of one process: timeouts, leaks, order
// violations and revocations, each with the request that caused it (id, method, path, client), for
// the admin page's "recent events" table.
//
// Recorded only on those slow paths (never on a successful acquire or release), into a small
// bounded ring under a mutex: the oldest event is dropped when the ring is full, so a storm of
// timeouts costs constant memory. The stats counters (lock/stats.hpp) keep the totals.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lock/mode.hpp"
#include "lock/options.hpp"

namespace kagi::lock {

enum class EventKind : unsigned char { kTimeout, kLeak, kOrderViolation, kRevoked };

// "timeout", "leak", "order_violation", "revoked".
std::string_view to_string(EventKind kind);

struct LockEvent {
  std::chrono::system_clock::time_point time;
  EventKind kind = EventKind::kTimeout;
  std::string name;           // the lock name
  Mode mode = Mode::kShared;  // of the lock asked for (not known for order violations)
  HolderInfo who;             // the request that timed out, leaked, or took locks out of order
  std::string detail;         // e.g. "waited 3000 ms", "taken while holding 'b/2'"
};

// Thread-safe.
class EventLog {
 public:
  explicit EventLog(size_t capacity = 64) : capacity_(capacity) {}
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Adds `event` (its time is set if left at the epoch). Never throws: an event that cannot
  // be stored (out of memory) is counted but dropped.
  void record(LockEvent event) noexcept;
  // The same, stamped now; the event is built inside, so a failed allocation drops it instead
  // of escaping from the noexcept paths of the lock context.
  void record(EventKind kind, std::string_view name, Mode mode, const HolderInfo& who,
              std::string_view detail) noexcept;
  // The events still in the ring, newest first.
  std::vector<LockEvent> recent() const;
  // Every event ever recorded, including those the ring has dropped.
  uint64_t recorded() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<LockEvent> ring_;  // guarded by mu_; newest at the front
  uint64_t recorded_ = 0;       // guarded by mu_
};

}  // namespace kagi::lock
