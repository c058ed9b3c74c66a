#include <kagi/lock/errors.hpp>

#include <string>

namespace kagi::lock {
namespace {

class LockCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "kagi.lock"; }
  std::string message(int code) const override {
    switch (static_cast<Errc>(code)) {
      case Errc::kTimeout:
        return "lock wait timed out (the lock is busy; retry later)";
      case Errc::kInvalidName:
        return "invalid lock name (segments of [a-z0-9_.-] separated by '/', at most 200 bytes)";
      case Errc::kOrderViolation:
        return "lock taken out of canonical order while holding others (take them as a set)";
      case Errc::kReleased:
        return "the guard no longer holds its lock";
      case Errc::kFenceLost:
        return "the lock backend no longer grants this guard's epoch";
      case Errc::kBackend:
        return "the lock backend failed";
      case Errc::kAlreadyHeld:
        return "this request already holds the lock (taking it again would wait on itself)";
      case Errc::kNameCollision:
        return "two lock names map to one lock file (hash collision detected)";
      case Errc::kRevoked:
        return "the lock was revoked (held longer than locks.max_hold_ms, or revoked by an "
               "admin); another request may hold it now";
      case Errc::kUnavailable:
        return "the lock backend cannot be reached now (retry later; the log says why)";
    }
    return "unknown lock error " + std::to_string(code);
  }
};

std::string printable(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (name.size() > 80) out += "...";
  return out;
}

}  // namespace

const std::error_category& lock_category() {
  static const LockCategory category;
  return category;
}

std::error_code make_error_code(Errc e) { return {static_cast<int>(e), lock_category()}; }

LockBusy::LockBusy(std::string name, std::chrono::milliseconds waited)
    : std::runtime_error("lock '" + name + "' is busy: gave up after " +
                         std::to_string(waited.count()) + " ms"),
      name_(std::move(name)),
      waited_(waited) {}

LockBusy::LockBusy(std::string name, std::chrono::milliseconds waited, const std::string& message)
    : std::runtime_error(message), name_(std::move(name)), waited_(waited) {}

LockUnavailable::LockUnavailable(std::string name, std::chrono::milliseconds waited,
                                 std::string reason)
    : LockBusy(name, waited,
               "lock '" + name + "' is unavailable after " + std::to_string(waited.count()) +
                   " ms: " + reason),
      reason_(std::move(reason)) {}

LockNameError::LockNameError(std::string name, const std::string& reason)
    : std::invalid_argument("invalid lock name '" + printable(name) + "': " + reason +
                            " (use segments of [a-z0-9_.-] separated by '/')"),
      name_(std::move(name)) {}

}  // namespace kagi::lock
