// apps/chat/presence.hpp — who is in a room: the names seen there in the last minute.
//
// Presence is a small file per room ("chat/who/<room>.txt" under data.dir, one "time\tname"
// line per name), protected by its own lock "chat/who/<room>" so that keeping it current never
// waits for the room's message lock. It is a file, not memory, so every process sees it.
// These functions are the pure part: parsing, updating and reading a room's list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::apps::chat {

inline constexpr int64_t kPresenceWindowS = 60;
// A name already seen this recently is not written again (a poll would otherwise commit a
// file every time).
inline constexpr int64_t kPresenceRefreshS = 15;
inline constexpr size_t kPresenceMaxNames = 500;

struct Seen {
  std::string name;
  int64_t time = 0;  // unix seconds
  friend bool operator==(const Seen&, const Seen&) = default;
};

// Malformed lines are skipped.
std::vector<Seen> parse_presence(std::string_view text);
std::string encode_presence(const std::vector<Seen>& seen);

// True if `name` is missing from `seen` or was last seen kPresenceRefreshS or more ago.
bool needs_touch(const std::vector<Seen>& seen, std::string_view name, int64_t now);

// Records `name` as seen at `now` and drops everyone not seen within the window (and the
// oldest beyond kPresenceMaxNames).
void touch(std::vector<Seen>& seen, std::string_view name, int64_t now);

// The names seen within the window at `now`, sorted.
std::vector<std::string> present(const std::vector<Seen>& seen, int64_t now);

}  // namespace kagi::apps::chat
