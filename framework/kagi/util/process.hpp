// util/process.hpp — this process's pid, and a counter that changes in every child after
// fork(), without a system call per ask: both are cached and refreshed in the child by a
// pthread_atfork handler. Per-process caches (buffered random bytes, the lock service's fork
// check) use them on every request.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace kagi::util {

pid_t current_pid();

// Different in a child than in its parent (and than in any earlier process state): a cache
// that remembers the value it was filled under knows whether it was inherited.
uint64_t fork_generation();

}  // namespace kagi::util
