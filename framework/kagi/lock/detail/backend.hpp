// lock/detail/backend.hpp — the interface every lock backend implements (local, postgres and
// dir and lockd), and the factories.
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
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/guard.hpp>
#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/lock/options.hpp>

namespace kagi::lock {

// One name of a set handed to Session::acquire_set: the name and mode in, the grant out.
struct SetEntry {
  std::string_view name;
  Mode mode = Mode::kShared;
  uint64_t epoch = 0;
  void* handle = nullptr;
  bool contended = false;  // had to wait
};

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
  // Like acquire but never waits for the lock (Errc::kTimeout if it is not available now). A
  // backend that has to ask a server waits for the answer no longer than `deadline`.
  virtual std::error_code try_acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                      uint64_t& epoch, void*& handle) = 0;
  // Also called by the service's watchdog thread to revoke a lock (lock_service.hpp), while
  // the session's request thread may be using the session for other names: it must be safe
  // for that. The request never releases a revoked handle again.
  virtual void release(std::string_view name, Mode mode, void* handle) noexcept = 0;
  // Empty if the lock behind `handle` is still granted with `epoch`; Errc::kFenceLost if not.
  virtual std::error_code verify(std::string_view name, uint64_t epoch,
                                 void* handle) const noexcept = 0;

  // True if acquire_set takes a whole set in one step (one round trip to a server): the
  // LockContext then hands it sets instead of taking their names one by one.
  virtual bool takes_sets_at_once() const { return false; }
  // Takes every entry (validated, distinct, in canonical order) before `deadline`, all or
  // nothing: on failure none of them is held. Only called if takes_sets_at_once() (the
  // default answers operation_not_supported).
  virtual std::error_code acquire_set(std::span<SetEntry> entries, Clock::time_point deadline);
  // Runs `work` on the connection that holds the lock behind `handle` and returns its result:
  // storage commits there, so a lost lock (a dead connection) cannot commit. Errc::kFenceLost
  // if that connection is gone; std::errc::operation_not_supported (the default) for a backend
  // that holds locks on no connection.
  virtual std::error_code with_connection(void* handle, const ConnectionWork& work);
  // The request ended and nothing is held any more: a remote backend gives its connection
  // back to the pool here.
  virtual void end_request() noexcept {}
  // More about the last failure than its error code (e.g. "connection refused"), for the log
  // line and the LockUnavailable it becomes. Empty if there is nothing to add.
  virtual std::string last_error() const { return {}; }
  // True once every lock the session held was lost at once (the lockd backend: the connection
  // they were held on ended), until end_request(). The context then fences every guard it
  // handed out (held() false, verify() Errc::kFenceLost); the session refuses further
  // acquires meanwhile. Read after each call into the session, from either thread.
  virtual bool lost_held_locks() const noexcept { return false; }
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

// The `postgres` backend: session advisory locks on pooled connections
// (lock/detail/postgres_backend.cpp). Throws std::invalid_argument if the DSN does not parse;
// connects to nothing until a request takes a lock.
std::unique_ptr<Backend> make_postgres_backend(const LockOptions& options);

// The `dir` backend: lock directories with owner records and leases under
// `options.dir`/dirlocks, a folder several hosts may share (lock/detail/dir_backend.cpp).
std::unique_ptr<Backend> make_dir_backend(const LockOptions& options);
// Throws std::invalid_argument for dir options that cannot work (a lease under 100 ms, a host
// id that cannot name a file).
void check_dir_options(const LockOptions& options);
// The `lockd` backend: locks held by kagi-lockd over one pooled connection per lock context
// (lock/detail/lockd_backend.cpp). Throws std::invalid_argument for a bad locks.lockd.address
// or an unreadable secret file; connects to nothing until a request takes a lock.
std::unique_ptr<Backend> make_lockd_backend(const LockOptions& options);

// The backend `options.backend` names.
std::unique_ptr<Backend> make_backend(const LockOptions& options);

}  // namespace kagi::lock
