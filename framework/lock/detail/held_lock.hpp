// lock/detail/held_lock.hpp — one lock a LockContext holds: owned by the Guard that proves
// it, listed by the context (which releases what is left at request end). Not thread-safe:
// one request is served by one thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "lock/file_lock.hpp"
#include "lock/mode.hpp"

namespace kagi::lock {

class LockContext;
struct PrefixStats;

namespace detail {

struct HeldLock {
  LockContext* ctx = nullptr;  // null once released (by the guard or at request end)
  std::string name;
  Mode mode = Mode::kShared;
  uint64_t epoch = 0;
  void* handle = nullptr;  // the backend session's handle
  int slot = -1;           // status registry slot, -1 if not published
  PrefixStats* stats = nullptr;
  Clock::time_point acquired;
};

}  // namespace detail
}  // namespace kagi::lock
