#include <kagi/util/wait_fd.hpp>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <thread>

namespace kagi::util {

bool wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec timeout{static_cast<time_t>(ns / 1000000000),
                           static_cast<long>(ns % 1000000000)};
    pollfd p{fd, events, 0};
    const int n = ::ppoll(&p, 1, &timeout, nullptr);
    if (n > 0) return true;  // ready, or an error / hang-up the next call reports
    if (n < 0 && errno != EINTR) {
      // The wait itself failed (out of memory): readiness is unknown, and answering "ready"
      // would have the caller read EAGAIN and call again at once, spinning. Try again a
      // little later, until the deadline.
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(5)));
    }
  }
}

}  // namespace kagi::util
