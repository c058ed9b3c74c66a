#include "chat/parking.hpp"

namespace kagi::apps::chat {

ParkingLot::ParkResult ParkingLot::park(Waiter waiter) {
  util::MutexLock lock(mu_);
  // Checked and counted under one lock: two requests racing for the last place cannot both
  // get it.
  if (limits_.max_waiters != 0 && entries_.size() >= limits_.max_waiters) {
    ++stats_.refused;
    return {.admission = Admission::kLotFull};
  }
  auto client = per_client_.find(waiter.client);
  if (limits_.max_waiters_per_client != 0 && client != per_client_.end() &&
      client->second >= limits_.max_waiters_per_client) {
    ++stats_.refused;
    return {.admission = Admission::kClientFull};
  }
  if (client == per_client_.end()) client = per_client_.emplace(waiter.client, 0).first;
  ++client->second;
  const uint64_t ticket = next_ticket_++;
  const bool earliest = deadlines_.empty() || waiter.deadline < deadlines_.begin()->first;
  deadlines_.emplace(waiter.deadline, ticket);
  by_room_[waiter.room].insert(ticket);
  entries_.emplace(ticket, Entry{std::move(waiter)});
  ++stats_.total;
  return {.admission = Admission::kParked, .earliest = earliest};
}

ParkingLot::Waiter ParkingLot::take_locked(uint64_t ticket) {
  auto it = entries_.find(ticket);
  Waiter w = std::move(it->second.waiter);
  entries_.erase(it);
  deadlines_.erase({w.deadline, ticket});
  auto room = by_room_.find(w.room);
  room->second.erase(ticket);
  if (room->second.empty()) by_room_.erase(room);
  auto client = per_client_.find(w.client);
  if (--client->second == 0) per_client_.erase(client);
  return w;
}

size_t ParkingLot::deliver(std::string_view room, std::span<const Message> messages, int64_t last) {
  std::vector<Waiter> due;
  {
    util::MutexLock lock(mu_);
    auto it = by_room_.find(std::string(room));
    if (it == by_room_.end()) return 0;
    std::vector<uint64_t> tickets;
    for (uint64_t t : it->second) {
      if (entries_.at(t).waiter.since < last) tickets.push_back(t);
    }
    for (uint64_t t : tickets) due.push_back(take_locked(t));
    stats_.delivered += due.size();
  }
  // Waiters often share a `since` (everyone was up to date): build each answer once.
  std::optional<int64_t> built_for;
  std::string body;
  for (auto& w : due) {
    if (built_for != w.since) {
      body = messages_json(newer_than(messages, w.since), last);
      built_for = w.since;
    }
    w.complete(body);
  }
  return due.size();
}

size_t ParkingLot::expire(Clock::time_point now) {
  std::vector<Waiter> due;
  {
    util::MutexLock lock(mu_);
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      due.push_back(take_locked(deadlines_.begin()->second));
    }
    stats_.expired += due.size();
  }
  for (auto& w : due) w.complete(messages_json({}, w.since));
  return due.size();
}

size_t ParkingLot::sweep_gone() {
  std::vector<Waiter> gone;
  {
    util::MutexLock lock(mu_);
    std::vector<uint64_t> tickets;
    for (const auto& [ticket, entry] : entries_) {
      if (entry.waiter.gone && entry.waiter.gone()) tickets.push_back(ticket);
    }
    for (uint64_t t : tickets) gone.push_back(take_locked(t));
    stats_.gone += gone.size();
  }
  // Answered anyway: the front end drops the bytes and can then free the request.
  for (auto& w : gone) w.complete(messages_json({}, w.since));
  return gone.size();
}

size_t ParkingLot::close_all() {
  std::vector<Waiter> all;
  {
    util::MutexLock lock(mu_);
    while (!entries_.empty()) all.push_back(take_locked(entries_.begin()->first));
    stats_.expired += all.size();
  }
  for (auto& w : all) w.complete(messages_json({}, w.since));
  return all.size();
}

std::optional<ParkingLot::Clock::time_point> ParkingLot::next_deadline() const {
  util::MutexLock lock(mu_);
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

bool ParkingLot::has_waiters(std::string_view room) const {
  util::MutexLock lock(mu_);
  return by_room_.contains(std::string(room));
}

std::vector<std::string> ParkingLot::rooms_with_waiters() const {
  util::MutexLock lock(mu_);
  std::vector<std::string> rooms;
  for (const auto& [room, tickets] : by_room_) rooms.push_back(room);
  return rooms;
}

ParkingLot::Stats ParkingLot::stats() const {
  util::MutexLock lock(mu_);
  Stats s = stats_;
  s.parked = entries_.size();
  s.clients = per_client_.size();
  return s;
}

size_t ParkingLot::waiters_of(std::string_view client) const {
  util::MutexLock lock(mu_);
  auto it = per_client_.find(std::string(client));
  return it == per_client_.end() ? 0 : it->second;
}

}  // namespace kagi::apps::chat
