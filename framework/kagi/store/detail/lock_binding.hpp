// store/detail/lock_binding.hpp — checking the guard a DataDir call was given: that it still
// holds its lock, and that the file is protected by the same lock as before.
//
// Which lock protects which file is the caller's choice, written at every call site. The
// bindings remember the lock each file was first used under and report a file touched under
// another one: "the wrong lock" protects nothing. A diagnostic, not a rule: the call goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <kagi/lock/guard.hpp>
#include <kagi/store/status.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::store::detail {

// Ok if `guard` holds its lock; else Errc::kNotHeld, or the lock layer's kRevoked for a guard
// that was revoked (held too long, or from the admin page), so the caller learns why.
Status check_held(std::string_view op, std::string_view path, const lock::Guard& guard);

// Thread-safe.
class LockBindings {
 public:
  // Remembers `lock` for `path` on first use. Later, a different lock is counted and the first
  // such call per file logged (op, path, both locks). Bounded: the table is cleared when full,
  // which at worst forgets a binding.
  void note(std::string_view op, std::string_view path, const std::string& lock) KAGI_EXCLUDES(mu_);

  // How many calls used a different lock than the file's first one.
  uint64_t mismatches() const { return mismatches_.load(std::memory_order_relaxed); }

 private:
  struct Binding {
    std::string lock;
    bool warned = false;  // a mismatch on this file was logged already
  };

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  util::Mutex mu_;
  // Looked up by string_view: a file's every later use allocates nothing.
  std::unordered_map<std::string, Binding, Hash, std::equal_to<>> bindings_ KAGI_GUARDED_BY(mu_);
  std::atomic<uint64_t> mismatches_{0};
};

}  // namespace kagi::store::detail
