// lock/lock_context.hpp — one request's locks (`ctx.locks` in a handler).
//
//   auto board = ctx.locks.exclusive("bbs/board/3");          // waits up to the timeout
//   auto text = ctx.data.read(board, "bbs/3.dat");            // read under the lock
//   ...
//   // Several names at once: one set, taken in canonical order, guards in the order asked.
//   auto [board, flood] = ctx.locks.exclusive_set({"bbs/board/3", "bbs/flood/ab"});
//   auto [index, post] = ctx.locks.acquire(lock::shared("bbs/index"), lock::exclusive("bbs/3"));
//
// Contract:
//  - Every wait ends by its deadline: the per-call timeout, or the service default
//    (locks.timeout_ms). The throwing calls throw LockBusy then (the pipeline answers 503).
//  - Names are validated (lock/detail/names.hpp); a bad one throws LockNameError.
//  - Canonical order is the byte order of names. A set is always taken in that order, and
//    hands its guards back in the order the names were given. Taking
//    a name that sorts before one this context already holds is an order violation: logged
//    (both names and the route) and counted; with order_check = "fail" it throws
//    LockOrderError at once. Either way the wait stays bounded, so the P→Q / Q→P trap ends.
//  - Taking a name this context already holds throws LockOrderError (it would wait on itself).
//  - A lock held longer than locks.max_hold_ms, or revoked from the admin page, is taken away
//    by the service's watchdog (lock/lock_service.hpp): released for the next waiter, its
//    guard fenced (held() false, verify() Errc::kRevoked, so storage refuses its commit), its
//    own release a no-op.
//  - A backend that loses every lock of the request at once (lockd: the connection they are
//    held on ends) has every guard fenced (held() false, verify() Errc::kFenceLost), and
//    further locks of the request fail (LockUnavailable) until it ends.
//  - end_request() (also run by the destructor) releases every guard still alive, logs each
//    as a leak with its name and route, and counts it. Those guards turn inert: a guard never
//    outlives its request. The context may be used again afterwards.
//
// Not thread-safe: one request is served by one thread at a time (the watchdog's revocations
// are the one exception, serialised by the context's mutex). It must not outlive the
// LockService that made it (LockService::context() is the way to make one).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/detail/held_lock.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/lock/guard.hpp>
#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock {

class Session;
namespace detail {
class ServiceCore;
}

// One name of a mixed set for LockContext::acquire: lock::shared("a"), lock::exclusive("b").
struct SharedName {
  using Guard = SharedGuard;
  static constexpr Mode kMode = Mode::kShared;
  std::string_view name;
};
struct ExclusiveName {
  using Guard = ExclusiveGuard;
  static constexpr Mode kMode = Mode::kExclusive;
  std::string_view name;
};
inline SharedName shared(std::string_view name) { return {name}; }
inline ExclusiveName exclusive(std::string_view name) { return {name}; }

class LockContext final : private detail::LockOwner {
 public:
  using ms = std::chrono::milliseconds;

  // Made by LockService::context(); `core` is the service's.
  LockContext(detail::ServiceCore& core, HolderInfo who, std::unique_ptr<Session> session);
  ~LockContext();
  LockContext(const LockContext&) = delete;
  LockContext& operator=(const LockContext&) = delete;

  // Waits until `name` is held or the timeout passes (LockBusy).
  SharedGuard shared(std::string_view name, std::optional<ms> timeout = {});
  ExclusiveGuard exclusive(std::string_view name, std::optional<ms> timeout = {});

  // Never wait: nullopt if the name is not available right now.
  std::optional<SharedGuard> try_shared(std::string_view name);
  std::optional<ExclusiveGuard> try_exclusive(std::string_view name);

  // Sets: several names taken at once, in canonical order whatever order they are listed in,
  // under one deadline, all or nothing (on LockBusy nothing stays held). The guards come back
  // in the order the names were given, so a structured binding names each one:
  //
  //   auto [board, flood] = ctx.locks.exclusive_set({board_name, flood_name});
  //
  // An empty name leaves its place unlocked and its guard empty: for a lock the request needs
  // only sometimes. A name listed twice throws LockOrderError (it would wait on itself).
  template <size_t N>
  std::array<SharedGuard, N> shared_set(const std::string_view (&names)[N],
                                        std::optional<ms> timeout = {}) {
    return typed_set<SharedGuard, N>(names, Mode::kShared, timeout);
  }
  template <size_t N>
  std::array<ExclusiveGuard, N> exclusive_set(const std::string_view (&names)[N],
                                              std::optional<ms> timeout = {}) {
    return typed_set<ExclusiveGuard, N>(names, Mode::kExclusive, timeout);
  }
  // The same for a number of names known only at run time.
  std::vector<SharedGuard> shared_set(std::span<const std::string> names,
                                      std::optional<ms> timeout = {});
  std::vector<ExclusiveGuard> exclusive_set(std::span<const std::string> names,
                                            std::optional<ms> timeout = {});
  // A set of mixed modes, with the default timeout: each guard's type follows its mode.
  //   auto [index, post] = ctx.locks.acquire(lock::shared(a), lock::exclusive(b));
  template <typename... Names>
  std::tuple<typename Names::Guard...> acquire(Names... names) {
    static_assert(sizeof...(Names) > 0, "acquire() needs at least one name");
    const SetItem items[] = {{names.name, Names::kMode}...};
    detail::HeldLockPtr held[sizeof...(Names)];
    acquire_set(items, std::nullopt, held);
    return as_tuple<typename Names::Guard...>(held, std::index_sequence_for<Names...>{});
  }

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
  size_t held_count() const KAGI_EXCLUDES(mu_);

 private:
  struct SetItem {
    std::string_view name;  // empty: nothing to take here
    Mode mode;
  };
  // Takes items[i] into held[i] (left empty for an empty name), canonical order, all or
  // nothing; throws like the single calls.
  void acquire_set(std::span<const SetItem> items, std::optional<ms> timeout,
                   std::span<detail::HeldLockPtr> held);
  template <typename G, size_t N>
  std::array<G, N> typed_set(const std::string_view (&names)[N], Mode mode,
                             std::optional<ms> timeout) {
    SetItem items[N];
    for (size_t i = 0; i < N; ++i) items[i] = {names[i], mode};
    detail::HeldLockPtr held[N];
    acquire_set(items, timeout, held);
    std::array<G, N> out;
    for (size_t i = 0; i < N; ++i) out[i] = G(std::move(held[i]));
    return out;
  }
  // The run-time-sized sets (defined in lock_context.cpp, its only user).
  template <typename G>
  std::vector<G> vector_set(std::span<const std::string> names, Mode mode,
                            std::optional<ms> timeout);
  template <typename... Gs, size_t... I>
  static std::tuple<Gs...> as_tuple(detail::HeldLockPtr* held, std::index_sequence<I...>) {
    return std::tuple<Gs...>(Gs(std::move(held[I]))...);
  }

  // kAlreadyHeld if the k-th name in canonical `order` equals the one before it.
  static std::error_code listed_twice(std::span<const SetItem> items, std::span<const size_t> order,
                                      size_t k, std::string* why);
  // A set in one step of the backend (Session::takes_sets_at_once): `order` is canonical.
  void acquire_set_at_once(std::span<const SetItem> items, std::span<const size_t> order,
                           Clock::time_point started, Clock::time_point deadline,
                           std::span<detail::HeldLockPtr> held);
  // A fresh record for a name about to be taken (validated and order-checked already).
  detail::HeldLockPtr new_record(std::string_view name, Mode mode);
  // The backend granted `held`: counts it, publishes it as held, lists it in held_.
  void grant(detail::HeldLock& held, Clock::time_point started, bool contended) KAGI_EXCLUDES(mu_);
  // The single calls: take() waits and throws on failure; try_take() returns null if the
  // name is busy and throws on any other failure.
  detail::HeldLockPtr take(std::string_view name, Mode mode, std::optional<ms> timeout);
  detail::HeldLockPtr try_take(std::string_view name, Mode mode);
  // `started` is when the caller began (read once; the deadline is usually derived from it).
  std::error_code acquire_one(std::string_view name, Mode mode, Clock::time_point started,
                              Clock::time_point deadline, bool try_only, detail::HeldLockPtr& out,
                              std::string* why) noexcept KAGI_EXCLUDES(mu_);
  // Also reserves room in held_ for one more lock (may throw std::bad_alloc). Reads held_
  // without mu_ (on every acquire): this thread is its only writer and the watchdog only
  // reads it, so the read races with nothing; the checker cannot know whose thread this is.
  std::error_code check_order(std::string_view name, std::string* why)
      KAGI_EXCLUDES(mu_) KAGI_NO_THREAD_SAFETY_ANALYSIS;
  // Counts a wait that reached its deadline and records the event (may throw bad_alloc).
  void record_timeout(const detail::HeldLock& held, Clock::time_point started);
  [[noreturn]] void raise(std::error_code ec, std::string_view name, Clock::time_point started,
                          const std::string& why) const;
  Clock::duration timeout_or_default(std::optional<ms> timeout) const;

  // detail::LockOwner: for the guards and the service's watchdog.
  void release(detail::HeldLock& held) noexcept override KAGI_EXCLUDES(mu_);
  std::error_code verify(const detail::HeldLock& held) const noexcept override KAGI_EXCLUDES(mu_);
  std::error_code with_connection(const detail::HeldLock& held, const ConnectionWork& work) override
      KAGI_EXCLUDES(mu_);
  size_t revoke_due(Clock::time_point now, Clock::time_point overdue_before,
                    std::vector<std::string>& log) noexcept override KAGI_EXCLUDES(mu_);
  void revoke_locked(detail::HeldLock& held, Clock::time_point now, std::string_view why,
                     std::vector<std::string>& log) noexcept KAGI_REQUIRES(mu_);
  // If the session lost every lock it held (Session::lost_held_locks), fences each guard not
  // fenced yet: revoked, marked lost, unpublished, logged. Cheap when it did not.
  void fence_if_lost() const noexcept KAGI_EXCLUDES(mu_);
  void fence_if_lost_locked() const noexcept KAGI_REQUIRES(mu_);

  detail::ServiceCore& core_;
  const HolderInfo who_;
  const std::unique_ptr<Session> session_;
  // Guards held_ and the revocation state of the locks in it (HeldLock::revoked, handle,
  // slot): taken by the request's thread to add, release, verify and look through its locks,
  // and by the watchdog to revoke one.
  mutable util::Mutex mu_;
  // In acquisition order. Each is owned by its guard, which takes it out of here when it
  // releases (end_request() releases the rest; their guards then stay inert).
  std::vector<detail::HeldLock*> held_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::lock
