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

#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include <kagi/lock/detail/service_core.hpp>
#include <kagi/lock/events.hpp>
#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/options.hpp>
#include <kagi/lock/registry.hpp>
#include <kagi/lock/stats.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

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
  StatsSnapshot stats() const { return core_.stats.snapshot(); }
  // This process's recent timeouts, leaks and order violations, newest first (lock/events.hpp).
  std::vector<LockEvent> recent_events() const { return core_.events.recent(); }

  const LockOptions& options() const { return core_.options; }
  // Names held or waited for in this process right now (0 when idle).
  size_t active_names() const { return core_.backend->active_names(); }

  // One watchdog pass now (the thread runs one every watchdog_interval): revokes this
  // process's locks held past max_hold and those asked to be revoked. Returns how many.
  size_t revoke_due() { return core_.revoke_due(); }
  // Asks the process that published `entry` (any process on the host) to revoke it; see
  // Registry::request_revoke. Its watchdog does it within watchdog_interval.
  std::error_code request_revoke(const RegistryEntry& entry) const;

 private:
  explicit LockService(const LockOptions& options);
  void run_watchdog() KAGI_EXCLUDES(watchdog_mu_);

  detail::ServiceCore core_;
  const pid_t pid_;

  util::Mutex watchdog_mu_;
  util::CondVar watchdog_cv_;
  bool stopping_ KAGI_GUARDED_BY(watchdog_mu_) = false;
  std::thread watchdog_;  // last: started when everything above exists
};

}  // namespace kagi::lock
