// apps/chat/parking.hpp — the parked long-polls of one process, waiting for news.
//
// A GET /chat/{room}/messages that finds nothing newer than `since` is parked here and the
// handler returns: the request then holds no worker thread and no lock, only an entry in this
// table. It leaves the table exactly once, by one of:
//
//   deliver()     new messages in its room (called by whichever thread read them),
//   expire()      its deadline passed: answered with no messages,
//   sweep_gone()  its client went away: answered (the front end drops the bytes) and freed,
//   close_all()   the process is stopping: answered with no messages.
//
// Answers are sent outside the table's mutex, so a slow client never blocks parking or
// another delivery. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/message.hpp"

namespace kagi::apps::chat {

class ParkingLot {
 public:
  using Clock = std::chrono::steady_clock;

  struct Waiter {
    std::string room;
    int64_t since = 0;  // the client has every message up to this id
    Clock::time_point deadline;
    // Sends a 200 JSON answer (messages_json); false if the request was already answered.
    std::function<bool(std::string json)> complete;
    // Best effort: true once the client is known to have disconnected.
    std::function<bool()> gone;
  };

  struct Stats {
    size_t parked = 0;       // waiting now
    uint64_t total = 0;      // ever parked
    uint64_t delivered = 0;  // answered with messages
    uint64_t expired = 0;    // answered empty at the deadline
    uint64_t gone = 0;       // dropped because the client went away
  };

  ParkingLot() = default;
  ParkingLot(const ParkingLot&) = delete;
  ParkingLot& operator=(const ParkingLot&) = delete;

  // Parks `waiter`. Returns true if its deadline is earlier than every other waiter's (the
  // caller then wakes the timer so it is not overslept).
  bool park(Waiter waiter);

  // Answers every waiter of `room` whose `since` is below `last` with the messages newer
  // than its `since` (`messages`: the room's recent messages in ascending id order). Returns
  // how many were answered.
  size_t deliver(std::string_view room, std::span<const Message> messages, int64_t last);

  // Answers every waiter whose deadline is at or before `now` with no messages.
  size_t expire(Clock::time_point now);

  // Frees every waiter whose client has gone.
  size_t sweep_gone();

  // Answers every waiter with no messages (process shutdown).
  size_t close_all();

  std::optional<Clock::time_point> next_deadline() const;
  bool has_waiters(std::string_view room) const;
  std::vector<std::string> rooms_with_waiters() const;
  Stats stats() const;

 private:
  struct Entry {
    Waiter waiter;
  };
  // Removes `ticket` from every index and returns its waiter. Needs mu_ held.
  Waiter take_locked(uint64_t ticket);

  mutable std::mutex mu_;
  uint64_t next_ticket_ = 1;                                     // guarded by mu_
  std::map<uint64_t, Entry> entries_;                            // guarded by mu_
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;   // guarded by mu_
  std::unordered_map<std::string, std::set<uint64_t>> by_room_;  // guarded by mu_
  Stats stats_;                                                  // guarded by mu_
};

}  // namespace kagi::apps::chat
