// util/process.hpp — this process's pid, and a counter that changes in every child after
// fork(), without a system call per ask: both are cached and refreshed in the child by a
// pthread_atfork handler. Per-process caches (buffered random bytes, the lock service's fork
// check) use them on every request. And the host's name, which says where a process runs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace kagi::util {

pid_t current_pid();

// Different in a child than in its parent (and than in any earlier process state): a cache
// that remembers the value it was filled under knows whether it was inherited.
uint64_t fork_generation();

// gethostname(2); empty if it fails. A system call each time: for start-up, not requests.
std::string host_name();

// Raises the soft limit on open files to the hard one and logs the limit in force (a server's
// connections each cost a descriptor, and the soft default, often 1024, is nobody's choice):
// "<program>: open files limit 65536 (raised from 1024)".
void raise_open_file_limit(const std::string& program);

}  // namespace kagi::util
