#include <kagi/lock/lock_context.hpp>

#include <algorithm>
#include <new>
#include <numeric>

#include <kagi/lock/detail/backend.hpp>
#include <kagi/lock/detail/log.hpp>
#include <kagi/lock/detail/names.hpp>
#include <kagi/lock/detail/service_core.hpp>

namespace kagi::lock {

LockContext::LockContext(detail::ServiceCore& core, HolderInfo who,
                         std::unique_ptr<Session> session)
    : core_(core), who_(std::move(who)), session_(std::move(session)) {
  core_.add(this);
}

LockContext::~LockContext() {
  end_request();
  core_.remove(this);
}

Clock::duration LockContext::timeout_or_default(std::optional<ms> timeout) const {
  return timeout.value_or(core_.options.timeout);
}

size_t LockContext::held_count() const {
  util::MutexLock lock(mu_);
  return held_.size();
}

std::error_code LockContext::check_order(std::string_view name, std::string* why) {
  if (held_.size() == held_.capacity()) {
    // Room for one more, so that nothing can throw once the lock is taken. Under mu_: growing
    // moves the array the watchdog may be walking.
    util::MutexLock lock(mu_);
    held_.reserve(held_.size() + 1);
  }
  const detail::HeldLock* later = nullptr;  // the greatest held name that sorts after `name`
  for (const detail::HeldLock* h : held_) {
    if (h->name == name) {
      if (why) {
        *why = "this request already holds '" + h->name + "' (" + std::string(to_string(h->mode)) +
               ")";
      }
      return make_error_code(Errc::kAlreadyHeld);
    }
    if (h->name > name && (!later || h->name > later->name)) later = h;
  }
  if (!later) return {};
  const std::string message = "order violation: '" + std::string(name) + "' taken while holding '" +
                              later->name + "', which sorts after it (request " + who_.request_id +
                              " " + who_.method + " " + who_.path +
                              "); take them as one set: ctx.locks.exclusive_set({...})";
  core_.stats.for_name(name).order_violations.fetch_add(1, std::memory_order_relaxed);
  log_event(message);
  core_.events.record(EventKind::kOrderViolation, name, Mode::kShared, who_,
                      "taken while holding '" + later->name + "'");
  if (core_.options.order_check_fail) {
    if (why) *why = message;
    return make_error_code(Errc::kOrderViolation);
  }
  return {};
}

detail::HeldLockPtr LockContext::new_record(std::string_view name, Mode mode) {
  auto held = detail::make_held_lock();
  // A recycled record: every field is set here.
  held->owner = nullptr;
  held->name.assign(name);
  held->mode = mode;
  held->epoch = 0;
  held->handle = nullptr;
  held->slot = -1;
  held->stats = &core_.stats.for_name(name);
  held->revoked.store(false, std::memory_order_relaxed);
  held->lost = false;
  return held;
}

void LockContext::grant(detail::HeldLock& held, Clock::time_point started, bool contended) {
  held.acquired = contended ? Clock::now() : started;
  PrefixStats& stats = *held.stats;
  stats.acquisitions.fetch_add(1, std::memory_order_relaxed);
  if (contended) stats.contended.fetch_add(1, std::memory_order_relaxed);
  stats.wait.record(held.acquired - started);
  if (Registry* registry = core_.registry.get()) {
    if (held.slot >= 0) {
      registry->mark_held(held.slot, held.acquired);
    } else {
      held.slot =
          registry->publish(who_, held.name, held.mode, held.acquired, Registry::State::kHeld);
    }
  }
  held.owner = this;
  util::MutexLock lock(mu_);  // from here on the watchdog may revoke it
  held_.push_back(&held);     // room was reserved by check_order: cannot throw
}

std::error_code LockContext::acquire_one(std::string_view name, Mode mode,
                                         Clock::time_point started, Clock::time_point deadline,
                                         bool try_only, detail::HeldLockPtr& out,
                                         std::string* why) noexcept {
  try {
    if (auto ec = validate_name(name, why)) return ec;
    if (auto ec = check_order(name, why)) return ec;  // may throw bad_alloc: caught below
    auto held = new_record(name, mode);
    Registry* registry = core_.registry.get();

    // The common case first: a free name is granted without waiting, so nothing is published
    // as "waiting" and no second clock read is needed (its wait is recorded as zero).
    bool contended = false;
    // A try still waits for a lock server's answer: bounded by the default timeout.
    std::error_code ec =
        session_->try_acquire(name, mode, try_only ? started + core_.options.timeout : deadline,
                              held->epoch, held->handle);
    if (ec == Errc::kTimeout && !try_only) {
      contended = true;
      if (registry) held->slot = registry->publish(who_, name, mode, started);
      ec = session_->acquire(name, mode, deadline, held->epoch, held->handle, nullptr);
    }
    if (ec) {
      if (registry) registry->clear(held->slot);
      if (ec == Errc::kTimeout && !try_only) record_timeout(*held, started);
      if (why && why->empty()) *why = session_->last_error();
      fence_if_lost();
      return ec;
    }
    grant(*held, started, contended);
    out = std::move(held);
    fence_if_lost();  // a queued release sent after the grant may have ended the connection
    return {};
  } catch (const std::bad_alloc&) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
}

void LockContext::record_timeout(const detail::HeldLock& held, Clock::time_point started) {
  const auto waited = Clock::now() - started;
  held.stats->timeouts.fetch_add(1, std::memory_order_relaxed);
  held.stats->wait.record(waited);
  core_.events.record(
      EventKind::kTimeout, held.name, held.mode, who_,
      "gave up after " + std::to_string(std::chrono::duration_cast<ms>(waited).count()) + " ms");
}

void LockContext::release(detail::HeldLock& held) noexcept {
  if (held.owner != this) return;
  util::MutexLock lock(mu_);
  // A revoked lock was released by the watchdog already (and may be someone else's now).
  if (!held.revoked.load(std::memory_order_relaxed)) {
    session_->release(held.name, held.mode, held.handle);
    held.stats->hold.record(Clock::now() - held.acquired);
    if (Registry* registry = core_.registry.get()) registry->clear(held.slot);
  }
  held.owner = nullptr;
  held.handle = nullptr;
  // Usually the newest lock goes first: search from the back.
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
    if (*it == &held) {
      held_.erase(std::next(it).base());
      break;
    }
  }
  fence_if_lost_locked();  // an UNLOCK that failed ended the connection, and the others with it
}

std::error_code LockContext::verify(const detail::HeldLock& held) const noexcept {
  if (held.owner != this) return make_error_code(Errc::kReleased);
  util::MutexLock lock(mu_);
  if (held.revoked.load(std::memory_order_relaxed)) {
    return make_error_code(held.lost ? Errc::kFenceLost : Errc::kRevoked);
  }
  const std::error_code ec = session_->verify(held.name, held.epoch, held.handle);
  fence_if_lost_locked();
  return ec;
}

std::error_code LockContext::with_connection(const detail::HeldLock& held,
                                             const ConnectionWork& work) {
  if (held.owner != this) return make_error_code(Errc::kReleased);
  void* handle = nullptr;
  {
    util::MutexLock lock(mu_);
    if (held.revoked.load(std::memory_order_relaxed)) {
      return make_error_code(held.lost ? Errc::kFenceLost : Errc::kRevoked);
    }
    handle = held.handle;
  }
  // Not under mu_: the work is a whole statement, and the watchdog must not wait for it. A
  // revocation meanwhile is queued by the session until the work is done, so the lock still
  // protects what the work writes.
  return session_->with_connection(handle, work);
}

size_t LockContext::revoke_due(Clock::time_point now, Clock::time_point overdue_before,
                               std::vector<std::string>& log) noexcept {
  Registry* registry = core_.registry.get();
  size_t revoked = 0;
  util::MutexLock lock(mu_);
  for (detail::HeldLock* held : held_) {
    if (held->revoked.load(std::memory_order_relaxed)) continue;
    if (held->acquired < overdue_before) {
      std::string why;
      try {
        why = "held " +
              std::to_string(std::chrono::duration_cast<ms>(now - held->acquired).count()) +
              " ms, longer than locks.max_hold_ms = " +
              std::to_string(core_.options.max_hold.count());
      } catch (...) {  // out of memory: revoked all the same, without the detail
      }
      revoke_locked(*held, now, why, log);
      ++revoked;
    } else if (registry && registry->revoke_requested(held->slot)) {
      revoke_locked(*held, now, "revoked from the admin page", log);
      ++revoked;
    }
  }
  fence_if_lost_locked();  // a revocation's UNLOCK that failed ends the connection
  return revoked;
}

void LockContext::fence_if_lost() const noexcept {
  if (!session_->lost_held_locks()) return;
  util::MutexLock lock(mu_);
  fence_if_lost_locked();
}

void LockContext::fence_if_lost_locked() const noexcept {
  if (!session_->lost_held_locks()) return;
  Registry* registry = core_.registry.get();
  for (detail::HeldLock* held : held_) {
    if (held->revoked.load(std::memory_order_relaxed)) continue;
    held->revoked.store(true, std::memory_order_release);
    held->lost = true;
    held->handle = nullptr;
    held->stats->hold.record(Clock::now() - held->acquired);
    if (registry) registry->clear(held->slot);
    held->slot = -1;
    try {
      const std::string why = "lost: the " + std::string(core_.backend->kind()) +
                              " backend's connection ended while the request held it";
      core_.events.record(EventKind::kRevoked, held->name, held->mode, who_, why);
      log_event("'" + held->name + "' (" + std::string(to_string(held->mode)) + ") " + why +
                " (request " + who_.request_id + " " + who_.method + " " + who_.path +
                "); its guard is fenced, and the request takes no more locks");
    } catch (...) {  // out of memory: fenced all the same
    }
  }
}

// With mu_ held. The session's release is safe from the watchdog's thread while the request's
// thread uses the session for another name (backend.hpp).
void LockContext::revoke_locked(detail::HeldLock& held, Clock::time_point now, std::string_view why,
                                std::vector<std::string>& log) noexcept {
  // Fenced before the next holder can be granted: whoever it wakes already sees this guard
  // as not held.
  held.revoked.store(true, std::memory_order_release);
  session_->release(held.name, held.mode, held.handle);
  held.handle = nullptr;
  held.stats->hold.record(now - held.acquired);
  held.stats->revocations.fetch_add(1, std::memory_order_relaxed);
  if (Registry* registry = core_.registry.get()) registry->clear(held.slot);
  held.slot = -1;
  core_.events.record(EventKind::kRevoked, held.name, held.mode, who_, why);
  try {
    log.push_back(
        "revoked: '" + held.name + "' (" + std::string(to_string(held.mode)) + ") " +
        std::string(why) + " (request " + who_.request_id + " " + who_.method + " " + who_.path +
        "); released for the next request, this request's commits through it are refused");
  } catch (...) {  // out of memory: the event ring and the counter still have it
  }
}

void LockContext::raise(std::error_code ec, std::string_view name, Clock::time_point started,
                        const std::string& why) const {
  const std::string n(name);
  if (ec == Errc::kTimeout) {
    auto waited = std::chrono::duration_cast<ms>(Clock::now() - started);
    log_event("busy: gave up on '" + n + "' after " + std::to_string(waited.count()) +
              " ms (request " + who_.request_id + " " + who_.method + " " + who_.path + ")");
    throw LockBusy(n, waited);
  }
  if (ec == Errc::kUnavailable) {
    auto waited = std::chrono::duration_cast<ms>(Clock::now() - started);
    const std::string reason = why.empty() ? ec.message() : why;
    log_event("unavailable: '" + n + "' after " + std::to_string(waited.count()) + " ms: " +
              reason + " (request " + who_.request_id + " " + who_.method + " " + who_.path + ")");
    throw LockUnavailable(n, waited, reason);
  }
  if (ec == Errc::kInvalidName) throw LockNameError(n, why);
  if (ec == Errc::kOrderViolation || ec == Errc::kAlreadyHeld) {
    throw LockOrderError(ec, "lock '" + n + "': " + (why.empty() ? ec.message() : why));
  }
  throw LockError(ec, "lock '" + n + "' (" + std::string(core_.backend->kind()) + " backend, dir " +
                          core_.options.dir + "): " + ec.message() +
                          (why.empty() ? std::string() : ": " + why));
}

detail::HeldLockPtr LockContext::take(std::string_view name, Mode mode, std::optional<ms> timeout) {
  const auto started = Clock::now();
  detail::HeldLockPtr held;
  std::string why;
  if (auto ec = acquire_one(name, mode, started, started + timeout_or_default(timeout), false, held,
                            &why)) {
    raise(ec, name, started, why);
  }
  return held;
}

detail::HeldLockPtr LockContext::try_take(std::string_view name, Mode mode) {
  detail::HeldLockPtr held;
  std::string why;
  const auto now = Clock::now();
  if (auto ec = acquire_one(name, mode, now, now, true, held, &why)) {
    if (ec != Errc::kTimeout) raise(ec, name, Clock::now(), why);
  }
  return held;
}

SharedGuard LockContext::shared(std::string_view name, std::optional<ms> timeout) {
  return SharedGuard(take(name, Mode::kShared, timeout));
}

ExclusiveGuard LockContext::exclusive(std::string_view name, std::optional<ms> timeout) {
  return ExclusiveGuard(take(name, Mode::kExclusive, timeout));
}

std::optional<SharedGuard> LockContext::try_shared(std::string_view name) {
  auto held = try_take(name, Mode::kShared);
  if (!held) return std::nullopt;
  return SharedGuard(std::move(held));
}

std::optional<ExclusiveGuard> LockContext::try_exclusive(std::string_view name) {
  auto held = try_take(name, Mode::kExclusive);
  if (!held) return std::nullopt;
  return ExclusiveGuard(std::move(held));
}

std::error_code LockContext::try_acquire_for(std::string_view name, Mode mode, ms timeout,
                                             Guard& out) noexcept {
  detail::HeldLockPtr held;
  const auto now = Clock::now();
  if (auto ec = acquire_one(name, mode, now, now + timeout, false, held, nullptr)) return ec;
  out = Guard(std::move(held));
  return {};
}

std::error_code LockContext::listed_twice(std::span<const SetItem> items,
                                          std::span<const size_t> order, size_t k,
                                          std::string* why) {
  if (k == 0 || items[order[k - 1]].name != items[order[k]].name) return {};
  *why = "'" + std::string(items[order[k]].name) + "' is listed twice in one set";
  return make_error_code(Errc::kAlreadyHeld);
}

void LockContext::acquire_set(std::span<const SetItem> items, std::optional<ms> timeout,
                              std::span<detail::HeldLockPtr> held) {
  const auto started = Clock::now();
  const auto deadline = started + timeout_or_default(timeout);
  // Canonical order: by name, whatever order the caller listed them in.
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return items[a].name < items[b].name; });
  // A set with one name (the others empty: locks needed only sometimes) is a single lock: the
  // backend's cheaper single path (for postgres, a try without a wait statement first).
  const size_t named = static_cast<size_t>(
      std::count_if(items.begin(), items.end(), [](const SetItem& i) { return !i.name.empty(); }));
  if (named > 1 && session_->takes_sets_at_once()) {
    acquire_set_at_once(items, order, started, deadline, held);
    return;
  }
  for (size_t k = 0; k < order.size(); ++k) {
    const SetItem& item = items[order[k]];
    if (item.name.empty()) continue;
    std::string why;
    std::error_code ec = listed_twice(items, order, k, &why);
    if (!ec) {
      ec = acquire_one(item.name, item.mode, Clock::now(), deadline, false, held[order[k]], &why);
    }
    if (ec) {
      for (detail::HeldLockPtr& h : held) {  // all or nothing
        if (h) release(*h);
        h.reset();
      }
      raise(ec, item.name, started, why);
    }
  }
}

void LockContext::acquire_set_at_once(std::span<const SetItem> items, std::span<const size_t> order,
                                      Clock::time_point started, Clock::time_point deadline,
                                      std::span<detail::HeldLockPtr> held) {
  {
    util::MutexLock lock(mu_);  // room for the whole set: nothing throws once it is taken
    held_.reserve(held_.size() + items.size());
  }
  std::vector<SetEntry> entries;
  std::vector<detail::HeldLock*> records;  // entries[i] is records[i]
  std::string label;                       // the names, for the busy page and the log
  for (size_t k = 0; k < order.size(); ++k) {
    const SetItem& item = items[order[k]];
    if (item.name.empty()) continue;
    std::string why;
    std::error_code ec = listed_twice(items, order, k, &why);
    if (!ec && !(ec = validate_name(item.name, &why))) ec = check_order(item.name, &why);
    if (ec) {
      for (detail::HeldLockPtr& h : held) h.reset();  // nothing is held yet
      raise(ec, item.name, started, why);
    }
    held[order[k]] = new_record(item.name, item.mode);
    records.push_back(held[order[k]].get());
    entries.push_back({.name = item.name, .mode = item.mode});
    label += (label.empty() ? "" : ", ") + std::string(item.name);
  }
  Registry* registry = core_.registry.get();
  // Published as waiting, then as held once the backend answers (one answer for the set).
  if (registry) {
    for (detail::HeldLock* r : records)
      r->slot = registry->publish(who_, r->name, r->mode, started);
  }
  if (std::error_code ec = session_->acquire_set(entries, deadline)) {
    fence_if_lost();
    for (detail::HeldLock* r : records) {
      if (registry) registry->clear(r->slot);
      if (ec == Errc::kTimeout) record_timeout(*r, started);
    }
    for (detail::HeldLockPtr& h : held) h.reset();
    raise(ec, label, started, session_->last_error());
  }
  for (size_t i = 0; i < records.size(); ++i) {
    records[i]->epoch = entries[i].epoch;
    records[i]->handle = entries[i].handle;
    grant(*records[i], started, entries[i].contended);
  }
  fence_if_lost();
}

template <typename G>
std::vector<G> LockContext::vector_set(std::span<const std::string> names, Mode mode,
                                       std::optional<ms> timeout) {
  std::vector<SetItem> items;
  items.reserve(names.size());
  for (const std::string& name : names) items.push_back({name, mode});
  std::vector<detail::HeldLockPtr> held(names.size());
  acquire_set(items, timeout, held);
  std::vector<G> out;
  out.reserve(held.size());
  for (auto& h : held) out.emplace_back(std::move(h));
  return out;
}

std::vector<SharedGuard> LockContext::shared_set(std::span<const std::string> names,
                                                 std::optional<ms> timeout) {
  return vector_set<SharedGuard>(names, Mode::kShared, timeout);
}

std::vector<ExclusiveGuard> LockContext::exclusive_set(std::span<const std::string> names,
                                                       std::optional<ms> timeout) {
  return vector_set<ExclusiveGuard>(names, Mode::kExclusive, timeout);
}

size_t LockContext::end_request() {
  size_t leaks = 0;
  for (;;) {
    detail::HeldLock* held;
    {
      util::MutexLock lock(mu_);
      if (held_.empty()) break;
      held = held_.back();
    }
    ++leaks;
    held->stats->leaks.fetch_add(1, std::memory_order_relaxed);
    core_.events.record(EventKind::kLeak, held->name, held->mode, who_,
                        "still held at the end of the request");
    log_event("leak: '" + held->name + "' (" + std::string(to_string(held->mode)) +
              ") still held at the end of request " + who_.request_id + " " + who_.method + " " +
              who_.path + "; released. Keep guards in the handler's scope.");
    release(*held);
  }
  session_->end_request();
  return leaks;
}

}  // namespace kagi::lock
