// lock/lock_service.hpp — the lock layer of one process: backend, in-process table, status
// registry and stats. Make one per process (after any fork()), and a LockContext per request.
//
//   auto service = lock::LockService::create(options);           // throws on bad options
//   auto locks = service->context({.request_id = id, .method = "POST", .path = "/bbs/3/post"});
//   auto guard = locks->exclusive("bbs/board/3");
//
// A hung holder never holds forever: a watchdog thread per service revokes every lock held
// longer than locks.max_hold_ms, and every lock an admin asked to revoke through the status
// registry (Registry::request_revoke, polled every LockOptions::watchdog_interval). Revoking
// releases the backend lock (the in-process table entry and the file lock) for the next
// waiter, clears the registry slot, counts the revocation under the name's prefix, records
// an event, and fences the holder's guard (lock/lock_context.hpp).
//
// Thread-safe. Contexts must not outlive their service.
#pragma once

#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <kagi/lock/backend.hpp>
#include <kagi/lock/events.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/options.hpp>
#include <kagi/lock/registry.hpp>
#include <kagi/lock/stats.hpp>

namespace kagi::lock {

class LockService {
 public:
  // Creates locks.dir if missing and this process's registry file in it. Throws
  // std::invalid_argument on bad options (unknown backend, non-positive timeout, empty dir)
  // and std::system_error if the directory cannot be created.
  static std::unique_ptr<LockService> create(const LockOptions& options);
  ~LockService();
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;

  // A fresh lock context for one request. Throws std::logic_error if called in a child of the
  // process that created the service (its descriptors would share lock ownership).
  std::unique_ptr<LockContext> context(HolderInfo who);

  // What every process on the host holds and waits for (from the registry files).
  RegistrySnapshot snapshot() const;
  // This process's counters per name prefix.
  StatsSnapshot stats() const;
  // This process's recent timeouts, leaks and order violations, newest first (lock/events.hpp).
  std::vector<LockEvent> recent_events() const { return events_.recent(); }

  const LockOptions& options() const { return options_; }
  // Names held or waited for in this process right now (0 when idle).
  size_t active_names() const { return backend_->active_names(); }

  // One watchdog pass now (the thread runs one every watchdog_interval): revokes this
  // process's locks held past max_hold and those asked to be revoked. Returns how many.
  size_t revoke_due();
  // Asks the process that published `entry` (any process on the host) to revoke it; see
  // Registry::request_revoke. Its watchdog does it within watchdog_interval.
  std::error_code request_revoke(const RegistryEntry& entry) const;

 private:
  friend class LockContext;
  explicit LockService(const LockOptions& options);
  void add_context(LockContext* ctx);
  void remove_context(LockContext* ctx) noexcept;
  void run_watchdog();

  LockOptions options_;
  pid_t pid_;
  Stats stats_;
  EventLog events_;
  std::unique_ptr<Registry> registry_;  // null if options_.registry is false
  std::unique_ptr<Backend> backend_;

  // Every live context, for the watchdog. Lock order: contexts_mu_, then a context's mu_.
  std::mutex contexts_mu_;
  std::vector<LockContext*> contexts_;  // guarded by contexts_mu_

  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool stopping_ = false;  // guarded by watchdog_mu_
  std::thread watchdog_;   // last: started when everything above exists
};

}  // namespace kagi::lock
