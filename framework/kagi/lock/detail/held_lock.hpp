// lock/detail/held_lock.hpp — one lock a LockContext holds, and the narrow interface through
// which its Guard and the service's watchdog reach that context.
//
// A HeldLock is owned by the Guard that proves it and listed by its context (which releases
// what is left at request end). It is used by the request's thread, and by the watchdog,
// which may revoke it: the watchdog touches a HeldLock only while it is listed by its context
// and under the context's mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/guard.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::lock {

struct PrefixStats;

namespace detail {

struct HeldLock;

// What the holder of locks (LockContext) offers to the guards it hands out and to the
// service's watchdog. Not for apps: they hold guards.
class LockOwner {
 public:
  // Releases `held` (a no-op for one revoked meanwhile); its guard turns inert.
  virtual void release(HeldLock& held) noexcept = 0;
  // Empty if `held` is still granted; Errc::kReleased / kRevoked / kFenceLost otherwise.
  virtual std::error_code verify(const HeldLock& held) const noexcept = 0;
  // Runs `work` on the connection holding `held` (lock/lock_connection.hpp).
  virtual std::error_code with_connection(const HeldLock& held, const ConnectionWork& work) = 0;
  // The watchdog's pass: revokes each lock held since before `overdue_before`, or asked to be
  // revoked through the registry, adding a log line for each to `log` (written once no mutex
  // is held). Returns how many it revoked.
  virtual size_t revoke_due(Clock::time_point now, Clock::time_point overdue_before,
                            std::vector<std::string>& log) noexcept = 0;

 protected:
  ~LockOwner() = default;
};

// Written by the request's thread before the lock is listed; afterwards `handle`, `slot` and
// `revoked` change only under the owner's mutex (the watchdog revokes).
struct HeldLock {
  LockOwner* owner = nullptr;  // null once released (by the guard or at request end)
  std::string name;
  Mode mode = Mode::kShared;
  uint64_t epoch = 0;
  void* handle = nullptr;  // the backend session's handle
  int slot = -1;           // status registry slot, -1 if not published
  PrefixStats* stats = nullptr;
  Clock::time_point acquired;
  // Set (under the owner's mutex) when the watchdog took the lock away: the backend lock and
  // the registry slot are released already, and verify() answers Errc::kRevoked. Read without
  // the mutex by Guard::held().
  std::atomic<bool> revoked{false};
  // With `revoked`: taken away because the backend lost it (its connection ended), not by the
  // watchdog; verify() answers Errc::kFenceLost. Under the owner's mutex.
  bool lost = false;
};

}  // namespace detail
}  // namespace kagi::lock
