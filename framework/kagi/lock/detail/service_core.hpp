// lock/detail/service_core.hpp — what a LockService shares with the LockContexts it makes.
//
// The options, the stats, the event log, the status registry and the backend, plus the list
// of live contexts that the service's watchdog walks. A context holds a reference to its
// service's core and touches nothing else of the service. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/detail/backend.hpp>
#include <kagi/lock/detail/held_lock.hpp>
#include <kagi/lock/events.hpp>
#include <kagi/lock/options.hpp>
#include <kagi/lock/registry.hpp>
#include <kagi/lock/stats.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock::detail {

class ServiceCore {
 public:
  // Creates the registry (if options.registry) and the backend. Throws std::system_error if
  // the registry file cannot be made.
  explicit ServiceCore(const LockOptions& options);
  ServiceCore(const ServiceCore&) = delete;
  ServiceCore& operator=(const ServiceCore&) = delete;

  const LockOptions options;
  Stats stats;
  EventLog events;
  const std::unique_ptr<Registry> registry;  // null if options.registry is false
  const std::unique_ptr<Backend> backend;

  // Every live context registers for the watchdog, from its constructor to its destructor.
  void add(LockOwner* owner) KAGI_EXCLUDES(mu_);
  void remove(LockOwner* owner) noexcept KAGI_EXCLUDES(mu_);

  // One watchdog pass over every live context (LockOwner::revoke_due); the log lines are
  // written after the mutexes are dropped. Returns how many locks it revoked.
  size_t revoke_due() KAGI_EXCLUDES(mu_);

 private:
  // Lock order: mu_, then a context's own mutex (taken inside LockOwner::revoke_due).
  util::Mutex mu_;
  std::vector<LockOwner*> owners_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::lock::detail
