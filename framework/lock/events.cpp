#include "lock/events.hpp"

#include <new>

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

void EventLog::record(LockEvent event) noexcept {
  if (event.time.time_since_epoch().count() == 0) event.time = std::chrono::system_clock::now();
  std::lock_guard lock(mu_);
  ++recorded_;
  if (capacity_ == 0) return;
  try {
    if (ring_.size() >= capacity_) ring_.pop_back();
    ring_.push_front(std::move(event));
  } catch (const std::bad_alloc&) {
    // Dropped; recorded_ still counts it.
  }
}

void EventLog::record(EventKind kind, std::string_view name, Mode mode, const HolderInfo& who,
                      std::string_view detail) noexcept {
  try {
    record(LockEvent{std::chrono::system_clock::now(), kind, std::string(name), mode, who,
                     std::string(detail)});
  } catch (const std::bad_alloc&) {
    std::lock_guard lock(mu_);
    ++recorded_;
  }
}

std::vector<LockEvent> EventLog::recent() const {
  std::lock_guard lock(mu_);
  return {ring_.begin(), ring_.end()};
}

uint64_t EventLog::recorded() const {
  std::lock_guard lock(mu_);
  return recorded_;
}

}  // namespace kagi::lock
