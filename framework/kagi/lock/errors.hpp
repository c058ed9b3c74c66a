// lock/errors.hpp — how the lock layer reports failure: error codes below, exceptions at the
// app-facing edge.
//
// The lower layers (table, file locks, backends) and the noexcept calls of LockContext return
// std::error_code values of category "kagi.lock" (Errc). The throwing calls of LockContext
// turn them into the exceptions below, which carry the same code plus what to tell the user:
//
//   LockBusy       a wait hit its deadline → the pipeline answers 503 + Retry-After
//   LockUnavailable  (a LockBusy) the backend cannot be reached (database down, pool
//                  exhausted, bad credentials) → 503 + Retry-After, the reason logged
//   LockNameError  a name failed validation → 500 and a log line (a bug in the app)
//   LockOrderError taken out of canonical order with order_check = "fail", or a name this
//                  request already holds → 500 (a bug in the app)
//   LockError      the backend failed (I/O, connection) → 500
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kagi::lock {

// Errors of the lock layer, as std::error_code values (category "kagi.lock").
enum class Errc {
  kTimeout = 1,     // the wait reached its deadline
  kInvalidName,     // name failed validation (charset, length, "..", empty segment)
  kOrderViolation,  // taken out of canonical order while holding others (order_check = fail)
  kReleased,        // the guard no longer holds its lock (released or request ended)
  kFenceLost,       // the backend no longer grants this guard's epoch (lease lost)
  kBackend,         // the backend failed (I/O error, connection lost)
  kAlreadyHeld,     // this request already holds the name: taking it again would self-deadlock
  kNameCollision,   // two names hashed to one lock file (detected through the stored name)
  kRevoked,         // the lock was taken away: held past locks.max_hold_ms, or from the admin page
  kUnavailable,     // the backend cannot be reached now (server down, connections used up)
};

const std::error_category& lock_category();
std::error_code make_error_code(Errc e);

class LockBusy : public std::runtime_error {
 public:
  LockBusy(std::string name, std::chrono::milliseconds waited);
  const std::string& name() const { return name_; }
  std::chrono::milliseconds waited() const { return waited_; }

 protected:
  LockBusy(std::string name, std::chrono::milliseconds waited, const std::string& message);

 private:
  std::string name_;
  std::chrono::milliseconds waited_;
};

// The backend could not be reached (e.g. PostgreSQL down): a LockBusy, so whatever answers a
// busy lock with 503 answers this too; reason() says what failed, for the log.
class LockUnavailable : public LockBusy {
 public:
  LockUnavailable(std::string name, std::chrono::milliseconds waited, std::string reason);
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

class LockNameError : public std::invalid_argument {
 public:
  LockNameError(std::string name, const std::string& reason);
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class LockOrderError : public std::logic_error {
 public:
  LockOrderError(std::error_code code, const std::string& message)
      : std::logic_error(message), code_(code) {}
  std::error_code code() const { return code_; }

 private:
  std::error_code code_;
};

class LockError : public std::runtime_error {
 public:
  LockError(std::error_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  std::error_code code() const { return code_; }

 private:
  std::error_code code_;
};

}  // namespace kagi::lock

template <>
struct std::is_error_code_enum<kagi::lock::Errc> : std::true_type {};
