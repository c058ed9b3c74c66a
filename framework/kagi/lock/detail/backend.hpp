// lock/detail/backend.hpp — the interface every lock backend implements (local now; dir, postgres
// and lockd later), and the factory for the local one.
//
// A Backend lives as long as its LockService. It opens one Session per LockContext: remote
// backends put one connection behind a session, so one request's locks share one connection
// and a dropped connection drops exactly that request's locks. Sessions are used by one thread
// at a time (like their LockContext) and must be closed before their Backend is destroyed.
//
// Name validation, order checks, stats, the status registry and leak reports are the
// LockContext's job; a backend only takes and releases names, with deadlines and fencing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <system_error>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/lock/options.hpp>

namespace kagi::lock {

class Session {
 public:
  virtual ~Session() = default;

  // Takes `name` (already validated) in `mode`, waiting until `deadline`. On success sets
  // `epoch` (fencing: strictly increasing per name for lease backends; process-unique for
  // local) and `handle`, which the caller passes back to release/verify. `contended` is set
  // if the call had to wait. Errc::kTimeout at the deadline; Errc::kBackend (or an errno)
  // if the backend failed.
  virtual std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                  uint64_t& epoch, void*& handle, bool* contended) = 0;
  // Like acquire but never waits (Errc::kTimeout if not available now).
  virtual std::error_code try_acquire(std::string_view name, Mode mode, uint64_t& epoch,
                                      void*& handle) = 0;
  // Also called by the service's watchdog thread to revoke a lock (lock_service.hpp), while
  // the session's request thread may be using the session for other names: it must be safe
  // for that. The request never releases a revoked handle again.
  virtual void release(std::string_view name, Mode mode, void* handle) noexcept = 0;
  // Empty if the lock behind `handle` is still granted with `epoch`; Errc::kFenceLost if not.
  virtual std::error_code verify(std::string_view name, uint64_t epoch,
                                 void* handle) const noexcept = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view kind() const = 0;
  virtual std::unique_ptr<Session> open_session(const HolderInfo& who) = 0;
  // Names currently held or waited for in this process (0 when idle), for tests and admin.
  virtual size_t active_names() const = 0;
};

// The `local` backend: the in-process LockTable in front of OFD locks on files under
// `options.dir` (which must exist).
std::unique_ptr<Backend> make_local_backend(const LockOptions& options);

}  // namespace kagi::lock
