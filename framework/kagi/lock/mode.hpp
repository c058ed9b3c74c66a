// lock/mode.hpp — lock modes and the lock layer's error codes.
//
// The lower layers (table, file locks, backends) report failure as std::error_code values of
// category "kagi.lock"; only the app-facing LockContext API turns them into exceptions.
#pragma once

#include <chrono>
#include <string_view>
#include <system_error>

namespace kagi::lock {

enum class Mode : unsigned char { kShared, kExclusive };

// Every deadline in the lock layer is on this clock (CLOCK_MONOTONIC).
using Clock = std::chrono::steady_clock;

// "shared" / "exclusive".
std::string_view to_string(Mode mode);

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
};

const std::error_category& lock_category();
std::error_code make_error_code(Errc e);

}  // namespace kagi::lock

template <>
struct std::is_error_code_enum<kagi::lock::Errc> : std::true_type {};
