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
//
// Caps. Each parked request holds an open connection (a file descriptor here, and one in the
// web server), so the lot refuses a waiter beyond Limits::max_waiters in all, or beyond
// Limits::max_waiters_per_client for its client: one client cannot take every descriptor of
// the process. A client's count goes down in the one place every exit above passes through,
// so it is released exactly once however the waiter leaves.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include "chat/message.hpp"

namespace kagi::apps::chat {

class ParkingLot {
 public:
  using Clock = std::chrono::steady_clock;

  // 0 means no cap.
  struct Limits {
    size_t max_waiters = 0;             // parked at once, all clients together
    size_t max_waiters_per_client = 0;  // parked at once with the same Waiter::client
  };

  struct Waiter {
    std::string room;
    std::string client{};  // who parked it (the client's address): counted per client
    int64_t since = 0;     // the client has every message up to this id
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
    uint64_t refused = 0;    // not parked: the lot or the client was at its cap
    size_t clients = 0;      // distinct clients waiting now
  };

  enum class Admission {
    kParked,
    kLotFull,     // max_waiters reached
    kClientFull,  // max_waiters_per_client reached for this waiter's client
  };
  struct ParkResult {
    Admission admission = Admission::kParked;
    // Parked with a deadline earlier than every other waiter's: the caller then wakes the
    // timer so it is not overslept.
    bool earliest = false;
  };

  ParkingLot() : ParkingLot(Limits{.max_waiters = 0, .max_waiters_per_client = 0}) {}  // no caps
  explicit ParkingLot(Limits limits) : limits_(limits) {}
  ParkingLot(const ParkingLot&) = delete;
  ParkingLot& operator=(const ParkingLot&) = delete;

  // Parks `waiter`, unless the lot or the waiter's client is at its cap: then the waiter is
  // dropped without any of its callbacks being called, and the caller answers the request
  // itself (the chat: 429).
  ParkResult park(Waiter waiter) KAGI_EXCLUDES(mu_);

  // Answers every waiter of `room` whose `since` is below `last` with the messages newer
  // than its `since` (`messages`: the room's recent messages in ascending id order). Returns
  // how many were answered.
  size_t deliver(std::string_view room, std::span<const Message> messages, int64_t last)
      KAGI_EXCLUDES(mu_);

  // Answers every waiter whose deadline is at or before `now` with no messages.
  size_t expire(Clock::time_point now) KAGI_EXCLUDES(mu_);

  // Frees every waiter whose client has gone.
  size_t sweep_gone() KAGI_EXCLUDES(mu_);

  // Answers every waiter with no messages (process shutdown).
  size_t close_all() KAGI_EXCLUDES(mu_);

  std::optional<Clock::time_point> next_deadline() const KAGI_EXCLUDES(mu_);
  bool has_waiters(std::string_view room) const KAGI_EXCLUDES(mu_);
  std::vector<std::string> rooms_with_waiters() const KAGI_EXCLUDES(mu_);
  Stats stats() const KAGI_EXCLUDES(mu_);
  // How many waiters `client` has parked now.
  size_t waiters_of(std::string_view client) const KAGI_EXCLUDES(mu_);

 private:
  struct Entry {
    Waiter waiter;
  };
  // Removes `ticket` from every index, releases its client's count, and returns its waiter.
  // The only way out of the lot.
  Waiter take_locked(uint64_t ticket) KAGI_REQUIRES(mu_);

  const Limits limits_;
  mutable util::Mutex mu_;
  uint64_t next_ticket_ KAGI_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> entries_ KAGI_GUARDED_BY(mu_);
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_ KAGI_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::set<uint64_t>> by_room_ KAGI_GUARDED_BY(mu_);
  std::unordered_map<std::string, size_t> per_client_ KAGI_GUARDED_BY(mu_);  // no zeros
  Stats stats_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::apps::chat
