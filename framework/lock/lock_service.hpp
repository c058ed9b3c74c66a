// lock/lock_service.hpp — the lock layer of one process: backend, in-process table, status
// registry and stats. Make one per process (after any fork()), and a LockContext per request.
//
//   auto service = lock::LockService::create(options);           // throws on bad options
//   auto locks = service->context({.request_id = id, .method = "POST", .path = "/bbs/3/post"});
//   auto guard = locks->exclusive("bbs/board/3");
//
// Thread-safe. Contexts must not outlive their service.
#pragma once

#include <unistd.h>
#include <memory>

#include "lock/backend.hpp"
#include "lock/events.hpp"
#include "lock/lock_context.hpp"
#include "lock/options.hpp"
#include "lock/registry.hpp"
#include "lock/stats.hpp"

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

 private:
  friend class LockContext;
  explicit LockService(const LockOptions& options);

  LockOptions options_;
  pid_t pid_;
  Stats stats_;
  EventLog events_;
  std::unique_ptr<Registry> registry_;  // null if options_.registry is false
  std::unique_ptr<Backend> backend_;
};

}  // namespace kagi::lock
