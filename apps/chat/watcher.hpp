// apps/chat/watcher.hpp — the thread that finishes parked long-polls: on news from any
// process of the host, at their deadline, or when their client goes away.
//
// Cross-process wake-ups ride on the store the rooms already live in (DataStore::watch): with
// data.backend = "files" every process watches the folder of room logs with inotify; with
// "postgres" every process LISTENs for the NOTIFY each append sends, so a message said on
// another host wakes this one. Either way a message appended by process A wakes the watcher
// of process B, which reads the room (under the room's shared lock, in `refresh`) and
// completes its own parked requests: one thread per process, no thread per waiter, no
// polling loop. As a safety net (a queue overflow, a reconnect, a filesystem without inotify
// events such as NFS) rooms with waiters are also re-read every kRecheck.
//
// The same thread answers parked requests whose deadline passed (ParkingLot::expire) and
// frees those whose client went away (ParkingLot::sweep_gone, every kSweep).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <thread>

#include <kagi/store/data_store.hpp>
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

  // Reads `feed` (DataStore::watch of the rooms folder) for changes to "<folder>/<room>.log"
  // and starts the thread. On failure `ec` is set and no thread runs.
  RoomWatcher(std::unique_ptr<store::ChangeFeed> feed, std::string_view folder, ParkingLot& lot,
              Refresh refresh, std::error_code& ec);
  // Stops the thread; parked requests stay in the lot (see ParkingLot::close_all).
  ~RoomWatcher();
  RoomWatcher(const RoomWatcher&) = delete;
  RoomWatcher& operator=(const RoomWatcher&) = delete;

  // Makes sure the feed collects news (after parking a request; see above). Thread-safe; a
  // system call only when the watch was dropped.
  void watch() KAGI_EXCLUDES(watch_mu_);
  // Makes the thread re-check its timers now (after parking a request with an earlier
  // deadline than any other). Thread-safe and cheap.
  void wake();
  // Whether the feed collects news now (tests).
  bool watching() const { return feed_->active(); }
  void stop();

  // How many times a room was re-read (for tests and stats).
  uint64_t refreshes() const { return refreshes_.load(std::memory_order_relaxed); }

 private:
  void run();
  // Takes the lot's lock under watch_mu_ (to see whether anyone is parked).
  void unwatch_if_idle() KAGI_EXCLUDES(watch_mu_);
  // The room a changed path names ("<folder>/<room>.log"), or "" for another file.
  std::string_view room_of(std::string_view path) const;

  const std::unique_ptr<store::ChangeFeed> feed_;
  const std::string folder_;  // "chat/rooms/"
  ParkingLot& lot_;
  const Refresh refresh_;
  // Orders watch() against unwatch_if_idle(): a request that parks after the emptiness check
  // resumes the feed after the pause, never before it.
  util::Mutex watch_mu_;
  util::UniqueFd wake_fd_;  // an eventfd: wake() and stop() write it
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refreshes_{0};
  std::thread thread_;  // last: started after every field it reads
};

}  // namespace kagi::apps::chat
