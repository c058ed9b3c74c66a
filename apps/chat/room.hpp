// apps/chat/room.hpp — a room on disk, and the names of the locks that protect it.
//
//   chat/rooms/<room>.log   the messages: one append-only log, lock "chat/room/<room>"
//   chat/who/<room>.txt     presence (see presence.hpp), its own lock "chat/who/<room>"
//
// Saying something appends one record (no rewrite per message). When the log holds more than
// four times chat.keep records it is rewritten atomically with the newest `keep` (readers see
// only the newest `keep` either way: store/numbered_log.hpp); the rewritten log
// starts with a record of the highest id ever given, so ids are never reused and a client
// polling with an old `since` never misses or repeats a message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/lock/guard.hpp>
#include <kagi/store/data_store.hpp>
#include <kagi/store/numbered_log.hpp>
#include "chat/message.hpp"

namespace kagi::apps::chat {

std::string room_lock_name(std::string_view room);
std::string who_lock_name(std::string_view room);
std::string room_log_path(std::string_view room);
std::string who_path(std::string_view room);
// The folder holding every room log (inside data.dir): the watcher's inotify target.
inline constexpr std::string_view kRoomsFolder = "chat/rooms";

// items: the messages, oldest first, at most chat.keep, valid while the room's lock is held;
// last_id: the highest id ever given.
using RoomState = store::NumberedLog<Message>;
// This process's decoded rooms (one per app: chat.keep messages each).
using RoomCache = store::NumberedLogCache<Message>;

inline std::unique_ptr<RoomCache> make_room_cache(size_t keep) {
  return std::make_unique<RoomCache>(keep, &decode);
}

// Reads the room under `guard` (shared or exclusive). Throws store::StoreError on I/O errors.
inline RoomState read_room(RoomCache& cache, const store::DataStore& data, const lock::Guard& guard,
                           std::string_view room) {
  return cache.read(data, guard, room_log_path(room));
}

// Appends `message` (its id must be state.last_id + 1), compacting as described above.
inline void add_message(store::DataStore& data, const lock::ExclusiveGuard& guard,
                        std::string_view room, const RoomState& state, const Message& message,
                        size_t keep) {
  store::add_numbered(data, guard, room_log_path(room), state, message, keep);
}

}  // namespace kagi::apps::chat
