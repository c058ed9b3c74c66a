#include <kagi/store/detail/lock_binding.hpp>

#include <kagi/util/log.hpp>

namespace kagi::store::detail {

namespace {

constexpr size_t kMaxBindings = 4096;

}  // namespace

Status check_held(std::string_view op, std::string_view path, const lock::Guard& guard) {
  if (guard.held()) return {};
  if (const std::error_code why = guard.verify(); why == lock::Errc::kRevoked) {
    return Status::failed(why, op, path, "lock '" + guard.name() + "'");
  }
  // A released guard may no longer know its name.
  return Status::failed(Errc::kNotHeld, op, path,
                        guard.name().empty() ? std::string("guard (released, moved-from or empty)")
                                             : "lock '" + guard.name() + "'");
}

void LockBindings::note(std::string_view op, std::string_view path, const std::string& lock) {
  Binding previous;
  {
    util::MutexLock held(mu_);
    if (auto known = bindings_.find(path); known != bindings_.end() && known->second.lock == lock) {
      return;  // the usual case: the file's lock, as before
    }
    auto [it, inserted] = bindings_.try_emplace(std::string(path), Binding{lock, false});
    if (inserted && bindings_.size() > kMaxBindings) {
      bindings_.clear();
      bindings_.try_emplace(std::string(path), Binding{lock, false});
      return;
    }
    if (inserted || it->second.lock == lock) return;
    previous = it->second;
    it->second.warned = true;
  }
  mismatches_.fetch_add(1, std::memory_order_relaxed);
  if (!previous.warned) {
    util::log_warn("store: " + std::string(op) + " " + std::string(path) + " under lock '" + lock +
                   "', but it was first used under lock '" + previous.lock +
                   "': a file must be protected by the same lock everywhere (logged once)");
  }
}

}  // namespace kagi::store::detail
