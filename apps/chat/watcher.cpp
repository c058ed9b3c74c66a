#include "chat/watcher.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <kagi/util/log.hpp>

namespace kagi::apps::chat {
namespace {

std::error_code last_error() { return {errno, std::system_category()}; }

// mkdir -p with `mode` (the data dir's folder mode: the rooms hold what users wrote); an
// existing folder is fine and keeps its mode.
std::error_code make_dirs(const std::string& dir, mode_t mode) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) return last_error();
  }
  return {};
}

}  // namespace

RoomWatcher::RoomWatcher(std::string dir, ParkingLot& lot, Refresh refresh, std::error_code& ec,
                         mode_t dir_mode)
    : dir_(std::move(dir)), lot_(lot), refresh_(std::move(refresh)) {
  ec = make_dirs(dir_, dir_mode);
  if (ec) return;
  inotify_fd_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_fd_) {
    ec = last_error();
    return;
  }
  {
    util::MutexLock lock(watch_mu_);
    if (!add_watch_locked()) {  // proves inotify works here; dropped when idle
      ec = last_error();
      return;
    }
  }
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_) {
    ec = last_error();
    return;
  }
  thread_ = std::thread([this] { run(); });
}

RoomWatcher::~RoomWatcher() { stop(); }  // then the members close the descriptors

bool RoomWatcher::add_watch_locked() {
  // An append is IN_MODIFY; a compaction renames a new log over the old one (IN_MOVED_TO).
  watch_ =
      ::inotify_add_watch(inotify_fd_.get(), dir_.c_str(), IN_MODIFY | IN_MOVED_TO | IN_CREATE);
  return watch_ >= 0;
}

void RoomWatcher::watch() {
  util::MutexLock lock(watch_mu_);
  if (watch_ >= 0) return;
  if (!add_watch_locked()) {
    util::log_warn(std::string("chat watcher: cannot watch ") + dir_ + ": " + std::strerror(errno) +
                   "; parked polls fall back to the " + std::to_string(kRecheck.count()) +
                   " ms recheck");
  }
}

bool RoomWatcher::watching() const {
  util::MutexLock lock(watch_mu_);
  return watch_ >= 0;
}

// Under watch_mu_, like watch(): a request that parks after the emptiness check below adds
// the watch back itself.
void RoomWatcher::unwatch_if_idle() {
  util::MutexLock lock(watch_mu_);
  if (watch_ < 0 || lot_.stats().parked > 0) return;
  ::inotify_rm_watch(inotify_fd_.get(), watch_);
  watch_ = -1;
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
  alignas(inotify_event) char buf[16 * 1024];

  while (!stopping_.load()) {
    // Sleep until the earliest timer: a deadline, the sweep, or the recheck.
    auto now = Clock::now();
    auto until = std::min(next_sweep, next_recheck);
    if (auto d = lot_.next_deadline()) until = std::min(until, *d);
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd fds[2] = {{inotify_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
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
    if (ready > 0 && (fds[0].revents & POLLIN)) {
      ssize_t n;
      while ((n = ::read(inotify_fd_.get(), buf, sizeof buf)) > 0) {
        for (char* p = buf; p < buf + n;) {
          auto* ev = reinterpret_cast<inotify_event*>(p);
          p += sizeof(inotify_event) + ev->len;
          if (ev->mask & IN_Q_OVERFLOW) {
            for (auto& room : lot_.rooms_with_waiters()) dirty.insert(room);
            continue;
          }
          std::string_view file(ev->len ? ev->name : "");
          file = file.substr(0, file.find('\0'));
          if (file.ends_with(".log")) dirty.emplace(file.substr(0, file.size() - 4));
        }
      }
    }

    now = Clock::now();
    if (now >= next_recheck) {
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
