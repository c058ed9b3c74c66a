// apps/chat/presence.hpp — who is in a room: the names seen there in the last minute.
//
// Presence is a small file per room ("chat/who/<room>.txt" under data.dir, one "time\tname"
// line per name), protected by its own lock "chat/who/<room>" so that keeping it current never
// waits for the room's message lock. It is a file, not memory, so every process sees it.
// These functions are the pure part: parsing, updating and reading a room's list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

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

// When `name` was last seen, if it is in `seen`.
std::optional<int64_t> last_seen(const std::vector<Seen>& seen, std::string_view name);

// True if `name` is missing from `seen` or was last seen kPresenceRefreshS or more ago.
bool needs_touch(const std::vector<Seen>& seen, std::string_view name, int64_t now);

// Records `name` as seen at `now` and drops everyone not seen within the window (and the
// oldest beyond kPresenceMaxNames).
void touch(std::vector<Seen>& seen, std::string_view name, int64_t now);

// The names seen within the window at `now`, sorted.
std::vector<std::string> present(const std::vector<Seen>& seen, int64_t now);

// What this process last learned of each (room, name): the time the name was seen, as read
// from or written to the file. While that is under kPresenceRefreshS old, a request needs
// neither the lock nor the file (a chat message would otherwise read the file every time).
// Bounded: forgets everything at kMaxEntries (names come from clients). Thread-safe.
class PresenceMemo {
 public:
  static constexpr size_t kMaxEntries = 4096;
  bool fresh(std::string_view room, std::string_view name, int64_t now) const KAGI_EXCLUDES(mu_);
  void remember(std::string_view room, std::string_view name, int64_t seen_at) KAGI_EXCLUDES(mu_);
  size_t size() const KAGI_EXCLUDES(mu_);

 private:
  static std::string key(std::string_view room, std::string_view name);
  mutable util::Mutex mu_;
  std::unordered_map<std::string, int64_t> seen_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::apps::chat
