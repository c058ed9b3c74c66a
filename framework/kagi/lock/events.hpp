// lock/events.hpp — the recent notable lock events of one process: timeouts, leaks, order
// violations and revocations, each with the request that caused it (id, method, path, client), for
// the admin page's "recent events" table.
//
// Recorded only on those slow paths (never on a successful acquire or release), into a bounded
// ring (util/recent_ring.hpp). The stats counters (lock/stats.hpp) keep the totals.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/util/recent_ring.hpp>

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

// Thread-safe; the capacity is 64 events by default.
class EventLog : public util::RecentRing<LockEvent> {
 public:
  explicit EventLog(size_t capacity = 64) : RecentRing(capacity) {}

  using RecentRing::record;
  // Records an event stamped now; the event is built inside, so a failed allocation drops it
  // (counted) instead of escaping from the noexcept paths of the lock context.
  void record(EventKind kind, std::string_view name, Mode mode, const HolderInfo& who,
              std::string_view detail) noexcept;
};

}  // namespace kagi::lock
