// util/wait_fd.hpp — wait for a descriptor to be ready, but never past a deadline.
//
//   if (!util::wait_fd(fd, POLLIN, deadline)) return timeout();   // else read without blocking
//
// For clients on non-blocking sockets whose every wait has a deadline (pg/connection.hpp, the
// lockd lock backend): ppoll() with the time left, again after a signal.
#pragma once

#include <chrono>

namespace kagi::util {

// True when `fd` is ready for `events` (POLLIN, POLLOUT), or reports an error or a hang-up
// that the next read or write will say; false when `deadline` came first. A ppoll() that
// fails (other than EINTR) is tried again every few milliseconds, never answered "ready".
bool wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline);

}  // namespace kagi::util
