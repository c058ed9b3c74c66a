#include "chat/presence.hpp"

#include <algorithm>
#include <charconv>

namespace kagi::apps::chat {

std::vector<Seen> parse_presence(std::string_view text) {
  std::vector<Seen> seen;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    size_t tab = line.find('\t');
    if (tab == std::string_view::npos || tab + 1 == line.size()) continue;
    int64_t time = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + tab, time);
    if (ec != std::errc() || end != line.data() + tab) continue;
    seen.push_back(Seen{std::string(line.substr(tab + 1)), time});
  }
  return seen;
}

std::string encode_presence(const std::vector<Seen>& seen) {
  std::string out;
  for (const auto& s : seen) {
    // Names never hold control characters (the chat strips them); guard the format anyway.
    if (s.name.find_first_of("\t\n") != std::string::npos) continue;
    out += std::to_string(s.time);
    out += '\t';
    out += s.name;
    out += '\n';
  }
  return out;
}

std::optional<int64_t> last_seen(const std::vector<Seen>& seen, std::string_view name) {
  for (const auto& s : seen) {
    if (s.name == name) return s.time;
  }
  return std::nullopt;
}

bool needs_touch(const std::vector<Seen>& seen, std::string_view name, int64_t now) {
  const std::optional<int64_t> at = last_seen(seen, name);
  return !at || now - *at >= kPresenceRefreshS;
}

std::string PresenceMemo::key(std::string_view room, std::string_view name) {
  std::string k(room);
  k += '\0';  // neither a room nor a name holds NUL
  k += name;
  return k;
}

bool PresenceMemo::fresh(std::string_view room, std::string_view name, int64_t now) const {
  util::MutexLock lock(mu_);
  auto it = seen_.find(key(room, name));
  return it != seen_.end() && now - it->second < kPresenceRefreshS;
}

void PresenceMemo::remember(std::string_view room, std::string_view name, int64_t seen_at) {
  util::MutexLock lock(mu_);
  if (seen_.size() >= kMaxEntries) seen_.clear();
  seen_[key(room, name)] = seen_at;
}

size_t PresenceMemo::size() const {
  util::MutexLock lock(mu_);
  return seen_.size();
}

void touch(std::vector<Seen>& seen, std::string_view name, int64_t now) {
  std::erase_if(seen,
                [&](const Seen& s) { return s.name == name || now - s.time >= kPresenceWindowS; });
  seen.push_back(Seen{std::string(name), now});
  if (seen.size() > kPresenceMaxNames) {
    // Drop the oldest of the others: the name just touched always stays, even when every
    // name was seen in the same second.
    std::stable_sort(seen.begin(), seen.end() - 1,
                     [](const Seen& a, const Seen& b) { return a.time > b.time; });
    seen.erase(seen.begin() + static_cast<std::ptrdiff_t>(kPresenceMaxNames - 1), seen.end() - 1);
  }
}

std::vector<std::string> present(const std::vector<Seen>& seen, int64_t now) {
  std::vector<std::string> names;
  for (const auto& s : seen) {
    if (now - s.time < kPresenceWindowS) names.push_back(s.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace kagi::apps::chat
