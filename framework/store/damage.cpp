#include "store/damage.hpp"

#include <new>
#include <utility>

namespace kagi::store {

void DamageLog::record(DamageEvent event) noexcept {
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

std::vector<DamageEvent> DamageLog::recent() const {
  std::lock_guard lock(mu_);
  return {ring_.begin(), ring_.end()};
}

uint64_t DamageLog::recorded() const {
  std::lock_guard lock(mu_);
  return recorded_;
}

DamageLog& damage_log() {
  static DamageLog log;
  return log;
}

}  // namespace kagi::store
