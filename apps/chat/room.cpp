#include "chat/room.hpp"

#include <algorithm>
#include <charconv>

namespace kagi::apps::chat {
namespace {

constexpr std::string_view kMetaTag = "meta1\t";

std::string meta_record(int64_t last_id) { return std::string(kMetaTag) + std::to_string(last_id); }

}  // namespace

std::string room_lock_name(std::string_view room) { return "chat/room/" + std::string(room); }
std::string who_lock_name(std::string_view room) { return "chat/who/" + std::string(room); }
std::string room_log_path(std::string_view room) {
  return std::string(kRoomsFolder) + "/" + std::string(room) + ".log";
}
std::string who_path(std::string_view room) { return "chat/who/" + std::string(room) + ".txt"; }

RoomState read_room(const store::DataDir& data, const lock::Guard& guard, std::string_view room,
                    size_t keep) {
  RoomState state;
  std::vector<std::string> records = data.read_log(guard, room_log_path(room)).value();
  state.records = records.size();
  for (const auto& record : records) {
    if (record.starts_with(kMetaTag)) {
      int64_t id = 0;
      std::string_view v = std::string_view(record).substr(kMetaTag.size());
      std::from_chars(v.data(), v.data() + v.size(), id);
      state.last_id = std::max(state.last_id, id);
    } else if (auto m = decode(record)) {
      state.last_id = std::max(state.last_id, m->id);
      state.messages.push_back(std::move(*m));
    }
  }
  if (state.messages.size() > keep) {
    state.messages.erase(state.messages.begin(), state.messages.end() - static_cast<long>(keep));
  }
  return state;
}

void add_message(store::DataDir& data, const lock::ExclusiveGuard& guard, std::string_view room,
                 const RoomState& state, const Message& message, size_t keep) {
  if (state.records + 1 <= 2 * keep) {
    data.append(guard, room_log_path(room), encode(message)).check();
    return;
  }
  // Compact: the high-water mark, the newest keep - 1 old messages, and the new one.
  std::vector<std::string> records{meta_record(message.id)};
  const size_t old = std::min(state.messages.size(), keep - 1);
  for (auto it = state.messages.end() - static_cast<long>(old); it != state.messages.end(); ++it) {
    records.push_back(encode(*it));
  }
  records.push_back(encode(message));
  data.rewrite_log(guard, room_log_path(room), records).check();
}

}  // namespace kagi::apps::chat
