#include "chat/room.hpp"

#include <algorithm>
#include <charconv>

namespace kagi::apps::chat {
std::string room_lock_name(std::string_view room) { return "chat/room/" + std::string(room); }
std::string who_lock_name(std::string_view room) { return "chat/who/" + std::string(room); }
std::string room_log_path(std::string_view room) {
  return std::string(kRoomsFolder) + "/" + std::string(room) + ".log";
}
std::string who_path(std::string_view room) { return "chat/who/" + std::string(room) + ".txt"; }

}  // namespace kagi::apps::chat
