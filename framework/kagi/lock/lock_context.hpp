// lock/lock_context.hpp — one request's locks (`ctx.locks` in a handler).
//
//   auto board = ctx.locks.exclusive("bbs/board/3");          // waits up to the timeout
//   auto text = ctx.data.read(board, "bbs/3.dat");            // read under the lock
//   ...
//   lock::LockSet both = ctx.locks.acquire({{"bbs/board/3", Mode::kExclusive},
//                                           {"bbs/flood/ab", Mode::kExclusive}});
//
// Contract:
//  - Every wait ends by its deadline: the per-call timeout, or the service default
//    (locks.timeout_ms). The throwing calls throw LockBusy then (the pipeline answers 503).
//  - Names are validated (lock/names.hpp); a bad one throws LockNameError.
//  - Canonical order is the byte order of names. A set is always taken in that order. Taking
//    a name that sorts before one this context already holds is an order violation: logged
//    (both names and the route) and counted; with order_check = "fail" it throws
//    LockOrderError at once. Either way the wait stays bounded, so the P→Q / Q→P trap ends.
//  - Taking a name this context already holds throws LockOrderError (it would wait on itself).
//  - A lock held longer than locks.max_hold_ms, or revoked from the admin page, is taken away
//    by the service's watchdog (lock/lock_service.hpp): released for the next waiter, its
//    guard fenced (held() false, verify() Errc::kRevoked, so storage refuses its commit), its
//    own release a no-op.
//  - end_request() (also run by the destructor) releases every guard still alive, logs each
//    as a leak with its name and route, and counts it. Those guards turn inert: a guard never
//    outlives its request. The context may be used again afterwards.
//
// Not thread-safe: one request is served by one thread at a time (the watchdog's revocations
// are the one exception, serialised by the context's mutex). It must not outlive the
// LockService that made it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <kagi/lock/errors.hpp>
#include <kagi/lock/guard.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/lock/options.hpp>

namespace kagi::lock {

class LockService;
class Session;

// Locks taken together by LockContext::acquire: all held, or none. Movable; releases all when
// destroyed.
class LockSet {
 public:
  LockSet() = default;
  LockSet(LockSet&&) noexcept = default;
  LockSet& operator=(LockSet&&) noexcept = default;

  // The guard of `name` (as given to acquire). Throws std::out_of_range if not in the set.
  const Guard& guard(std::string_view name) const;
  // Same, as an ExclusiveGuard; throws std::logic_error if `name` was taken shared.
  const ExclusiveGuard& exclusive(std::string_view name) const;
  // Same, as a SharedGuard; throws std::logic_error if `name` was taken exclusive.
  const SharedGuard& shared(std::string_view name) const;

  size_t size() const { return items_.size(); }
  bool held() const;
  void release();

 private:
  friend class LockContext;
  struct Item {
    Mode mode;
    SharedGuard shared;
    ExclusiveGuard exclusive;
  };
  const Item& find(std::string_view name) const;
  std::vector<Item> items_;  // canonical (byte) order of names
};

class LockContext {
 public:
  using ms = std::chrono::milliseconds;

  LockContext(LockService& service, HolderInfo who, std::unique_ptr<Session> session);
  ~LockContext();
  LockContext(const LockContext&) = delete;
  LockContext& operator=(const LockContext&) = delete;

  // Waits until `name` is held or the timeout passes (LockBusy).
  SharedGuard shared(std::string_view name, std::optional<ms> timeout = {});
  ExclusiveGuard exclusive(std::string_view name, std::optional<ms> timeout = {});

  // Never wait: nullopt if the name is not available right now.
  std::optional<SharedGuard> try_shared(std::string_view name);
  std::optional<ExclusiveGuard> try_exclusive(std::string_view name);

  // Takes a set at once: canonical order, one deadline, all-or-nothing (on LockBusy nothing
  // stays held). A name listed twice is taken once, exclusive if either entry says so.
  LockSet acquire(std::vector<std::pair<std::string, Mode>> set, std::optional<ms> timeout = {});

  // The error-value flavour: never throws. On success `out` (a Guard, or a SharedGuard /
  // ExclusiveGuard matching `mode`) holds the lock. Errc::kTimeout, kInvalidName,
  // kOrderViolation, kAlreadyHeld, or the backend's error otherwise.
  std::error_code try_acquire_for(std::string_view name, Mode mode, ms timeout,
                                  Guard& out) noexcept;

  // Releases every guard still alive (leaks: logged with name and route, counted); returns
  // how many there were.
  size_t end_request();

  const HolderInfo& holder() const { return who_; }
  // Locks this context holds right now.
  size_t held_count() const { return held_.size(); }

 private:
  friend class Guard;
  friend class LockService;
  // `started` is when the caller began (read once; the deadline is usually derived from it).
  std::error_code acquire_one(std::string_view name, Mode mode, Clock::time_point started,
                              Clock::time_point deadline, bool try_only, detail::HeldLockPtr& out,
                              std::string* why) noexcept;
  std::error_code check_order(std::string_view name, std::string* why) noexcept;
  [[noreturn]] void raise(std::error_code ec, std::string_view name, Clock::time_point started,
                          const std::string& why) const;
  void release(detail::HeldLock& held) noexcept;
  std::error_code verify(const detail::HeldLock& held) const noexcept;
  Clock::duration timeout_or_default(std::optional<ms> timeout) const;
  // The watchdog's pass over this context (called by LockService with its contexts mutex
  // held): revokes each lock held since before `overdue_before` or asked to be revoked in the
  // registry, and adds a log line for each to `log` (written once no mutex is held). Returns
  // how many it revoked.
  size_t revoke_due(Clock::time_point now, Clock::time_point overdue_before,
                    std::vector<std::string>& log) noexcept;
  void revoke_locked(detail::HeldLock& held, Clock::time_point now, std::string_view why,
                     std::vector<std::string>& log) noexcept;

  LockService& service_;
  HolderInfo who_;
  std::unique_ptr<Session> session_;
  // Guards held_ changes and the revocation state of the locks in it (HeldLock::revoked,
  // handle, slot): taken by the request's thread to add, release and verify a lock, and by
  // the watchdog to revoke one. The request's thread reads held_ without it (it is the only
  // writer).
  mutable std::mutex mu_;
  // In acquisition order. Each is owned by its guard, which takes it out of here when it
  // releases (end_request() releases the rest; their guards then stay inert).
  std::vector<detail::HeldLock*> held_;  // changed under mu_
};

}  // namespace kagi::lock
