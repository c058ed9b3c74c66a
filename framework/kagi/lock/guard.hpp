// lock/guard.hpp — the RAII guards a lock context hands out.
//
// A guard is proof that its request holds one named lock in one mode. Guards are movable,
// not copyable; the lock is released when the guard is destroyed or release() is called, and
// in any case when the request's LockContext ends (a guard still alive then is a leak: it is
// released, logged and counted, and the guard turns inert so it can never outlive its request).
//
// The storage layer takes guards as proof: reading needs any Guard, committing needs an
// ExclusiveGuard. A SharedGuard has no way to become exclusive, so "read, then lock the write"
// cannot be written.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <kagi/lock/errors.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::pg {
class Connection;
}

namespace kagi::lock {

// Set in an epoch that orders nothing beyond this process (see Guard::epoch).
inline constexpr uint64_t kUnorderedEpoch = uint64_t{1} << 63;
inline bool epoch_is_ordered(uint64_t epoch) { return epoch != 0 && !(epoch & kUnorderedEpoch); }

// Work run on the database connection that holds a lock (lock/lock_connection.hpp).
using ConnectionWork = std::function<std::error_code(pg::Connection&)>;

class Guard;
std::error_code with_lock_connection(const Guard& guard, const ConnectionWork& work);

namespace detail {
struct HeldLock;  // one held lock: owned by its guard, listed by its LockContext
// Deleting a HeldLock keeps a few per thread for the next acquire (no malloc/free per lock).
struct HeldLockRecycle {
  void operator()(HeldLock* held) const noexcept;
};
using HeldLockPtr = std::unique_ptr<HeldLock, HeldLockRecycle>;
HeldLockPtr make_held_lock();
}  // namespace detail

class Guard {
 public:
  Guard() = default;
  // Guards are made by LockContext (which alone can make a HeldLock); apps receive them.
  explicit Guard(detail::HeldLockPtr held);
  Guard(Guard&&) noexcept;
  Guard& operator=(Guard&&) noexcept;
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  ~Guard();

  // The lock's validated name, e.g. "bbs/board/3". Empty for a default-constructed guard.
  const std::string& name() const;
  Mode mode() const;
  // Fencing epoch handed out by the backend at acquire time. An ordered epoch
  // (epoch_is_ordered: postgres exclusive grants, from a server sequence) is larger than every
  // epoch granted on the same name before, by any process of any host, so storage can refuse a
  // writer older than one that already wrote. Otherwise (kUnorderedEpoch set: `local`, shared
  // grants) it only tells this process's grants apart.
  uint64_t epoch() const;

  // True while this guard holds its lock (false after release(), after the request ended,
  // after the lock was revoked, or for a moved-from / default guard).
  bool held() const;

  // Fencing: asks the backend, right now, whether this guard still holds its lock. Returns
  // an empty error_code if it does; Errc::kFenceLost / kReleased / kRevoked otherwise. Storage
  // calls it right before a commit becomes visible.
  std::error_code verify() const;

  // Releases now (idempotent). Prefer letting the guard leave scope.
  void release();

  explicit operator bool() const { return held(); }

 private:
  friend std::error_code with_lock_connection(const Guard& guard, const ConnectionWork& work);
  detail::HeldLockPtr held_;
};

// Held in shared mode: lets its holder read the data the lock protects.
class SharedGuard : public Guard {
 public:
  SharedGuard() = default;
  explicit SharedGuard(detail::HeldLockPtr held) : Guard(std::move(held)) {}
};

// Held in exclusive mode: lets its holder read and commit the data the lock protects.
class ExclusiveGuard : public Guard {
 public:
  ExclusiveGuard() = default;
  explicit ExclusiveGuard(detail::HeldLockPtr held) : Guard(std::move(held)) {}
};

}  // namespace kagi::lock
