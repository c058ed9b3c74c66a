// lock/detail/held_lock.hpp — one lock a LockContext holds: owned by the Guard that proves
// it, listed by the context (which releases what is left at request end). Used by the
// request's thread, and by the service's watchdog, which may revoke it: the watchdog touches
// a HeldLock only while it is listed by its context and under the context's mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <kagi/lock/file_lock.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::lock {

class LockContext;
struct PrefixStats;

namespace detail {

struct HeldLock {
  LockContext* ctx = nullptr;  // null once released (by the guard or at request end)
  std::string name;
  Mode mode = Mode::kShared;
  uint64_t epoch = 0;
  void* handle = nullptr;  // the backend session's handle
  int slot = -1;           // status registry slot, -1 if not published
  PrefixStats* stats = nullptr;
  Clock::time_point acquired;
  // Set (under the context's mutex) when the watchdog took the lock away: the backend lock
  // and the registry slot are released already, and verify() answers Errc::kRevoked. Read
  // without the mutex by Guard::held().
  std::atomic<bool> revoked{false};
};

}  // namespace detail
}  // namespace kagi::lock
