// apps/chat/watcher.hpp — the thread that finishes parked long-polls: on news from any
// process of the host, at their deadline, or when their client goes away.
//
// Cross-process wake-ups ride on the filesystem the rooms already live in: every process
// watches the folder of room logs with inotify, so a message appended by process A wakes the
// watcher of process B, which reads the room (under the room's shared lock, in `refresh`) and
// completes its own parked requests. Nothing else is shared between processes: no socket, no
// registry, no daemon. As a safety net (an inotify queue overflow, a filesystem without
// inotify events such as NFS) rooms with waiters are also re-read every kRecheck.
//
// The same thread answers parked requests whose deadline passed (ParkingLot::expire) and
// frees those whose client went away (ParkingLot::sweep_gone, every kSweep).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <thread>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include <kagi/util/unique_fd.hpp>

#include "chat/parking.hpp"

namespace kagi::apps::chat {

class RoomWatcher {
 public:
  static constexpr std::chrono::milliseconds kSweep{1000};
  static constexpr std::chrono::milliseconds kRecheck{5000};

  // Reads room `room` and delivers its news to the lot; runs on the watcher thread.
  using Refresh = std::function<void(const std::string& room)>;

  // Watches `dir` (created if missing, with `dir_mode`: the data directory's, see
  // store::DataDir::dir_mode) for changes to "<room>.log" files and starts the thread. On
  // failure `ec` is set and no thread runs.
  RoomWatcher(std::string dir, ParkingLot& lot, Refresh refresh, std::error_code& ec,
              mode_t dir_mode = 0700);
  // Stops the thread; parked requests stay in the lot (see ParkingLot::close_all).
  ~RoomWatcher();
  RoomWatcher(const RoomWatcher&) = delete;
  RoomWatcher& operator=(const RoomWatcher&) = delete;

  // Makes sure the folder is watched (after parking a request; see above). Thread-safe; a
  // system call only when the watch was dropped.
  void watch() KAGI_EXCLUDES(watch_mu_);
  // Makes the thread re-check its timers now (after parking a request with an earlier
  // deadline than any other). Thread-safe and cheap.
  void wake();
  // Whether the folder is watched now (tests).
  bool watching() const KAGI_EXCLUDES(watch_mu_);
  void stop();

  // How many times a room was re-read (for tests and stats).
  uint64_t refreshes() const { return refreshes_.load(std::memory_order_relaxed); }

 private:
  void run();
  // Takes the lot's lock under watch_mu_ (to see whether anyone is parked).
  void unwatch_if_idle() KAGI_EXCLUDES(watch_mu_);
  bool add_watch_locked() KAGI_REQUIRES(watch_mu_);

  const std::string dir_;
  ParkingLot& lot_;
  const Refresh refresh_;
  util::UniqueFd inotify_fd_;
  mutable util::Mutex watch_mu_;
  int watch_ KAGI_GUARDED_BY(watch_mu_) = -1;  // the inotify watch descriptor; -1: not watching
  util::UniqueFd wake_fd_;                     // an eventfd: wake() and stop() write it
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refreshes_{0};
  std::thread thread_;  // last: started after every field it reads
};

}  // namespace kagi::apps::chat
