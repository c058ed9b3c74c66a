#include <kagi/lock/lock_context.hpp>

#include <algorithm>
#include <map>
#include <new>

#include <kagi/lock/detail/held_lock.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/lock/log.hpp>
#include <kagi/lock/names.hpp>

namespace kagi::lock {

// ---- LockSet

const LockSet::Item& LockSet::find(std::string_view name) const {
  for (const Item& item : items_) {
    const Guard& g = item.mode == Mode::kShared ? static_cast<const Guard&>(item.shared)
                                                : static_cast<const Guard&>(item.exclusive);
    if (g.name() == name) return item;
  }
  throw std::out_of_range("lock '" + std::string(name) + "' is not in this lock set");
}

const Guard& LockSet::guard(std::string_view name) const {
  const Item& item = find(name);
  if (item.mode == Mode::kShared) return item.shared;
  return item.exclusive;
}

const ExclusiveGuard& LockSet::exclusive(std::string_view name) const {
  const Item& item = find(name);
  if (item.mode != Mode::kExclusive) {
    throw std::logic_error("lock '" + std::string(name) + "' was taken shared, not exclusive");
  }
  return item.exclusive;
}

const SharedGuard& LockSet::shared(std::string_view name) const {
  const Item& item = find(name);
  if (item.mode != Mode::kShared) {
    throw std::logic_error("lock '" + std::string(name) + "' was taken exclusive, not shared");
  }
  return item.shared;
}

bool LockSet::held() const {
  return !items_.empty() && std::all_of(items_.begin(), items_.end(), [](const Item& i) {
    return i.mode == Mode::kShared ? i.shared.held() : i.exclusive.held();
  });
}

void LockSet::release() {
  for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
    it->shared.release();
    it->exclusive.release();
  }
  items_.clear();
}

// ---- LockContext

LockContext::LockContext(LockService& service, HolderInfo who, std::unique_ptr<Session> session)
    : service_(service), who_(std::move(who)), session_(std::move(session)) {
  service_.add_context(this);
}

LockContext::~LockContext() {
  end_request();
  service_.remove_context(this);
}

Clock::duration LockContext::timeout_or_default(std::optional<ms> timeout) const {
  return timeout.value_or(service_.options_.timeout);
}

std::error_code LockContext::check_order(std::string_view name, std::string* why) noexcept {
  const detail::HeldLock* later = nullptr;
  for (const auto& h : held_) {
    if (h->name == name) {
      if (why)
        *why = "this request already holds '" + h->name + "' (" + std::string(to_string(h->mode)) +
               ")";
      return make_error_code(Errc::kAlreadyHeld);
    }
    if (h->name > name && (!later || h->name > later->name)) later = h;
  }
  if (!later) return {};
  const std::string message = "order violation: '" + std::string(name) + "' taken while holding '" +
                              later->name + "', which sorts after it (request " + who_.request_id +
                              " " + who_.method + " " + who_.path +
                              "); take them as one set: ctx.locks.acquire({...})";
  service_.stats_.for_name(name).order_violations.fetch_add(1, std::memory_order_relaxed);
  log_event(message);
  service_.events_.record(EventKind::kOrderViolation, name, Mode::kShared, who_,
                          "taken while holding '" + later->name + "'");
  if (service_.options_.order_check_fail) {
    if (why) *why = message;
    return make_error_code(Errc::kOrderViolation);
  }
  return {};
}

// Inlined into its callers: one frame less above the flock (see LOCKING.md).
[[gnu::always_inline]] inline std::error_code LockContext::acquire_one(
    std::string_view name, Mode mode, Clock::time_point started, Clock::time_point deadline,
    bool try_only, detail::HeldLockPtr& out, std::string* why) noexcept {
  try {
    if (auto ec = validate_name(name, why)) return ec;
    if (auto ec = check_order(name, why)) return ec;
    auto held = detail::make_held_lock();
    // A recycled record: every field is set here.
    held->ctx = nullptr;
    held->name.assign(name);
    held->mode = mode;
    held->epoch = 0;
    held->handle = nullptr;
    held->slot = -1;
    held->stats = &service_.stats_.for_name(name);
    held->revoked.store(false, std::memory_order_relaxed);
    if (held_.size() == held_.capacity()) {
      // So that nothing can throw after the lock is taken. Under mu_: growing moves the
      // array the watchdog may be walking.
      std::lock_guard lock(mu_);
      held_.reserve(held_.size() + 1);
    }
    Registry* registry = service_.registry_.get();

    // The common case first: a free name is granted without waiting, so nothing is published
    // as "waiting" and no second clock read is needed (its wait is recorded as zero).
    bool contended = false;
    std::error_code ec = session_->try_acquire(name, mode, held->epoch, held->handle);
    if (ec == Errc::kTimeout && !try_only) {
      contended = true;
      if (registry) held->slot = registry->publish(who_, name, mode, started);
      ec = session_->acquire(name, mode, deadline, held->epoch, held->handle, nullptr);
    }
    if (ec) {
      if (registry) registry->clear(held->slot);
      if (ec == Errc::kTimeout && !try_only) {
        const auto waited = Clock::now() - started;
        held->stats->timeouts.fetch_add(1, std::memory_order_relaxed);
        held->stats->wait.record(waited);
        service_.events_.record(EventKind::kTimeout, name, mode, who_,
                                "gave up after " +
                                    std::to_string(std::chrono::duration_cast<ms>(waited).count()) +
                                    " ms");
      }
      return ec;
    }
    held->acquired = contended ? Clock::now() : started;
    PrefixStats& stats = *held->stats;
    stats.acquisitions.fetch_add(1, std::memory_order_relaxed);
    if (contended) stats.contended.fetch_add(1, std::memory_order_relaxed);
    stats.wait.record(held->acquired - started);
    if (registry) {
      if (contended) {
        registry->mark_held(held->slot, held->acquired);
      } else {
        held->slot = registry->publish(who_, name, mode, held->acquired, Registry::State::kHeld);
      }
    }
    held->ctx = this;
    {
      std::lock_guard lock(mu_);  // from here on the watchdog may revoke it
      held_.push_back(held.get());
    }
    out = std::move(held);
    return {};
  } catch (const std::bad_alloc&) {
    return std::make_error_code(std::errc::not_enough_memory);
  }
}

void LockContext::release(detail::HeldLock& held) noexcept {
  if (held.ctx != this) return;
  std::lock_guard lock(mu_);
  // A revoked lock was released by the watchdog already (and may be someone else's now).
  if (!held.revoked.load(std::memory_order_relaxed)) {
    session_->release(held.name, held.mode, held.handle);
    held.stats->hold.record(Clock::now() - held.acquired);
    if (Registry* registry = service_.registry_.get()) registry->clear(held.slot);
  }
  held.ctx = nullptr;
  held.handle = nullptr;
  // Usually the newest lock goes first: search from the back.
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
    if (*it == &held) {
      held_.erase(std::next(it).base());
      break;
    }
  }
}

std::error_code LockContext::verify(const detail::HeldLock& held) const noexcept {
  if (held.ctx != this) return make_error_code(Errc::kReleased);
  std::lock_guard lock(mu_);
  if (held.revoked.load(std::memory_order_relaxed)) return make_error_code(Errc::kRevoked);
  return session_->verify(held.name, held.epoch, held.handle);
}

size_t LockContext::revoke_due(Clock::time_point now, Clock::time_point overdue_before,
                               std::vector<std::string>& log) noexcept {
  Registry* registry = service_.registry_.get();
  size_t revoked = 0;
  std::lock_guard lock(mu_);
  for (detail::HeldLock* held : held_) {
    if (held->revoked.load(std::memory_order_relaxed)) continue;
    if (held->acquired < overdue_before) {
      std::string why;
      try {
        why = "held " +
              std::to_string(std::chrono::duration_cast<ms>(now - held->acquired).count()) +
              " ms, longer than locks.max_hold_ms = " +
              std::to_string(service_.options_.max_hold.count());
      } catch (...) {  // out of memory: revoked all the same, without the detail
      }
      revoke_locked(*held, now, why, log);
      ++revoked;
    } else if (registry && registry->revoke_requested(held->slot)) {
      revoke_locked(*held, now, "revoked from the admin page", log);
      ++revoked;
    }
  }
  return revoked;
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
  if (Registry* registry = service_.registry_.get()) registry->clear(held.slot);
  held.slot = -1;
  service_.events_.record(EventKind::kRevoked, held.name, held.mode, who_, why);
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
  if (ec == Errc::kInvalidName) throw LockNameError(n, why);
  if (ec == Errc::kOrderViolation || ec == Errc::kAlreadyHeld) {
    throw LockOrderError(ec, "lock '" + n + "': " + (why.empty() ? ec.message() : why));
  }
  throw LockError(ec, "lock '" + n + "' (" + service_.backend_->kind().data() + " backend, dir " +
                          service_.options_.dir + "): " + ec.message());
}

SharedGuard LockContext::shared(std::string_view name, std::optional<ms> timeout) {
  const auto started = Clock::now();
  detail::HeldLockPtr held;
  std::string why;
  if (auto ec = acquire_one(name, Mode::kShared, started, started + timeout_or_default(timeout),
                            false, held, &why)) {
    raise(ec, name, started, why);
  }
  return SharedGuard(std::move(held));
}

ExclusiveGuard LockContext::exclusive(std::string_view name, std::optional<ms> timeout) {
  const auto started = Clock::now();
  detail::HeldLockPtr held;
  std::string why;
  if (auto ec = acquire_one(name, Mode::kExclusive, started, started + timeout_or_default(timeout),
                            false, held, &why)) {
    raise(ec, name, started, why);
  }
  return ExclusiveGuard(std::move(held));
}

std::optional<SharedGuard> LockContext::try_shared(std::string_view name) {
  detail::HeldLockPtr held;
  std::string why;
  const auto now = Clock::now();
  if (auto ec = acquire_one(name, Mode::kShared, now, now, true, held, &why)) {
    if (ec == Errc::kTimeout) return std::nullopt;
    raise(ec, name, Clock::now(), why);
  }
  return SharedGuard(std::move(held));
}

std::optional<ExclusiveGuard> LockContext::try_exclusive(std::string_view name) {
  detail::HeldLockPtr held;
  std::string why;
  const auto now = Clock::now();
  if (auto ec = acquire_one(name, Mode::kExclusive, now, now, true, held, &why)) {
    if (ec == Errc::kTimeout) return std::nullopt;
    raise(ec, name, Clock::now(), why);
  }
  return ExclusiveGuard(std::move(held));
}

std::error_code LockContext::try_acquire_for(std::string_view name, Mode mode, ms timeout,
                                             Guard& out) noexcept {
  detail::HeldLockPtr held;
  const auto now = Clock::now();
  if (auto ec = acquire_one(name, mode, now, now + timeout, false, held, nullptr)) return ec;
  out.release();
  out.held_ = std::move(held);
  return {};
}

LockSet LockContext::acquire(std::vector<std::pair<std::string, Mode>> set,
                             std::optional<ms> timeout) {
  const auto started = Clock::now();
  const auto deadline = started + timeout_or_default(timeout);
  // Canonical order; a name listed twice is taken once, in the stronger mode.
  std::map<std::string, Mode> wanted;
  for (auto& [name, mode] : set) {
    auto [it, inserted] = wanted.emplace(std::move(name), mode);
    if (!inserted && mode == Mode::kExclusive) it->second = Mode::kExclusive;
  }
  LockSet out;
  out.items_.reserve(wanted.size());
  for (const auto& [name, mode] : wanted) {
    detail::HeldLockPtr held;
    std::string why;
    if (auto ec = acquire_one(name, mode, Clock::now(), deadline, false, held, &why)) {
      out.release();  // all or nothing
      raise(ec, name, started, why);
    }
    LockSet::Item item{mode, {}, {}};
    if (mode == Mode::kShared) {
      item.shared = SharedGuard(std::move(held));
    } else {
      item.exclusive = ExclusiveGuard(std::move(held));
    }
    out.items_.push_back(std::move(item));
  }
  return out;
}

size_t LockContext::end_request() {
  size_t leaks = 0;
  while (!held_.empty()) {
    detail::HeldLock* held = held_.back();
    ++leaks;
    held->stats->leaks.fetch_add(1, std::memory_order_relaxed);
    service_.events_.record(EventKind::kLeak, held->name, held->mode, who_,
                            "still held at the end of the request");
    log_event("leak: '" + held->name + "' (" + std::string(to_string(held->mode)) +
              ") still held at the end of request " + who_.request_id + " " + who_.method + " " +
              who_.path + "; released. Keep guards in the handler's scope.");
    release(*held);
  }
  return leaks;
}

}  // namespace kagi::lock
