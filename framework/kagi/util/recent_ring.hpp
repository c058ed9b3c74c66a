// util/recent_ring.hpp — the most recent events of a process, bounded: what the admin page
// shows as "recent events" (lock timeouts, leaks and revocations; damaged log spans).
//
// Recorded on slow paths only, into a ring under a mutex: when it is full the oldest event is
// dropped, so a storm of events costs constant memory, and recorded() keeps the total.
// `Event` needs a `time` member (std::chrono::system_clock::time_point); one left at the epoch
// is stamped now. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <new>
#include <utility>
#include <vector>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::util {

template <typename Event>
class RecentRing {
 public:
  explicit RecentRing(size_t capacity) : capacity_(capacity) {}
  RecentRing(const RecentRing&) = delete;
  RecentRing& operator=(const RecentRing&) = delete;

  // Never throws: an event that cannot be stored (out of memory) is counted but dropped.
  void record(Event event) noexcept KAGI_EXCLUDES(mu_) {
    if (event.time.time_since_epoch().count() == 0) event.time = std::chrono::system_clock::now();
    MutexLock lock(mu_);
    ++recorded_;
    if (capacity_ == 0) return;
    try {
      if (ring_.size() >= capacity_) ring_.pop_back();
      ring_.push_front(std::move(event));
    } catch (const std::bad_alloc&) {
      // Dropped; recorded_ still counts it.
    }
  }
  // Counts an event that could not even be built (out of memory).
  void count_dropped() noexcept KAGI_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++recorded_;
  }
  // The events still in the ring, newest first.
  std::vector<Event> recent() const KAGI_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return {ring_.begin(), ring_.end()};
  }
  // Every event ever recorded, including those the ring has dropped.
  uint64_t recorded() const KAGI_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return recorded_;
  }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::deque<Event> ring_ KAGI_GUARDED_BY(mu_);  // newest at the front
  uint64_t recorded_ KAGI_GUARDED_BY(mu_) = 0;
};

}  // namespace kagi::util
