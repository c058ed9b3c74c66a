#include "chat/watcher.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <kagi/util/log.hpp>

namespace kagi::apps::chat {

RoomWatcher::RoomWatcher(std::unique_ptr<store::ChangeFeed> feed, std::string_view folder,
                         ParkingLot& lot, Refresh refresh, std::error_code& ec)
    : feed_(std::move(feed)),
      folder_(std::string(folder) + "/"),
      lot_(lot),
      refresh_(std::move(refresh)) {
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_) {
    ec = {errno, std::system_category()};
    return;
  }
  ec.clear();
  thread_ = std::thread([this] { run(); });
}

RoomWatcher::~RoomWatcher() { stop(); }  // then the members close the descriptors

void RoomWatcher::watch() {
  util::MutexLock lock(watch_mu_);
  if (feed_->active()) return;
  if (!feed_->resume()) {
    util::log_warn(std::string("chat watcher: cannot watch ") + folder_ + ": " +
                   std::strerror(errno) + "; parked polls fall back to the " +
                   std::to_string(kRecheck.count()) + " ms recheck");
  }
}

void RoomWatcher::unwatch_if_idle() {
  util::MutexLock lock(watch_mu_);
  if (lot_.stats().parked > 0) return;
  feed_->pause();
}

std::string_view RoomWatcher::room_of(std::string_view path) const {
  if (!path.starts_with(folder_) || !path.ends_with(".log")) return {};
  path.remove_prefix(folder_.size());
  path.remove_suffix(4);
  return path.find('/') == std::string_view::npos ? path : std::string_view();
}

void RoomWatcher::wake() {
  if (!wake_fd_) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
}

void RoomWatcher::stop() {
  stopping_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
}

void RoomWatcher::run() {
  using Clock = ParkingLot::Clock;
  auto next_sweep = Clock::now() + kSweep;
  auto next_recheck = Clock::now() + kRecheck;
  std::vector<std::string> changed;

  while (!stopping_.load()) {
    // Sleep until the earliest timer: a deadline, the sweep, or the recheck.
    auto now = Clock::now();
    auto until = std::min(next_sweep, next_recheck);
    // A feed without a connection (postgres, reconnecting) is drained every second: that is
    // when it tries again.
    const int feed_fd = feed_->fd();
    if (feed_fd < 0) until = std::min(until, now + std::chrono::seconds(1));
    if (auto d = lot_.next_deadline()) until = std::min(until, *d);
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd fds[2] = {{feed_fd, POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000)));
    if (ready < 0 && errno != EINTR) {
      util::log_error(std::string("chat watcher: poll: ") + std::strerror(errno));
      return;
    }

    std::set<std::string> dirty;
    if (ready > 0 && (fds[1].revents & POLLIN)) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &count, sizeof count);
    }
    if (feed_fd < 0 || (ready > 0 && (fds[0].revents & (POLLIN | POLLERR | POLLHUP)))) {
      changed.clear();
      if (!feed_->drain(changed)) {
        for (auto& room : lot_.rooms_with_waiters()) dirty.insert(room);  // news was missed
      }
      for (const std::string& path : changed) {
        if (std::string_view room = room_of(path); !room.empty()) dirty.emplace(room);
      }
    }

    now = Clock::now();
    if (now >= next_recheck) {
      changed.clear();
      (void)feed_->drain(changed);  // lets a feed that lost its connection reopen it
      for (auto& room : lot_.rooms_with_waiters()) dirty.insert(room);
      next_recheck = now + kRecheck;
    }
    for (const auto& room : dirty) {
      if (!lot_.has_waiters(room)) continue;  // nobody here waits for it: no read
      refreshes_.fetch_add(1, std::memory_order_relaxed);
      try {
        refresh_(room);
      } catch (const std::exception& e) {
        // A room that cannot be read now is retried at the next change or recheck; its
        // waiters still get their empty answer at the deadline.
        util::log_warn("chat watcher: cannot read room '" + room + "': " + e.what());
      }
    }
    lot_.expire(Clock::now());
    if (Clock::now() >= next_sweep) {
      lot_.sweep_gone();
      next_sweep = Clock::now() + kSweep;
    }
    unwatch_if_idle();
  }
}

}  // namespace kagi::apps::chat
