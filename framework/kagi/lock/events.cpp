#include <kagi/lock/events.hpp>

#include <new>
#include <string>

namespace kagi::lock {

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::kTimeout:
      return "timeout";
    case EventKind::kLeak:
      return "leak";
    case EventKind::kOrderViolation:
      return "order_violation";
    case EventKind::kRevoked:
      return "revoked";
  }
  return "unknown";
}

void EventLog::record(EventKind kind, std::string_view name, Mode mode, const HolderInfo& who,
                      std::string_view detail) noexcept {
  try {
    record(LockEvent{std::chrono::system_clock::now(), kind, std::string(name), mode, who,
                     std::string(detail)});
  } catch (const std::bad_alloc&) {
    count_dropped();
  }
}

}  // namespace kagi::lock
