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

bool needs_touch(const std::vector<Seen>& seen, std::string_view name, int64_t now) {
  for (const auto& s : seen) {
    if (s.name == name) return now - s.time >= kPresenceRefreshS;
  }
  return true;
}

void touch(std::vector<Seen>& seen, std::string_view name, int64_t now) {
  std::erase_if(seen,
                [&](const Seen& s) { return s.name == name || now - s.time >= kPresenceWindowS; });
  seen.push_back(Seen{std::string(name), now});
  if (seen.size() > kPresenceMaxNames) {
    std::stable_sort(seen.begin(), seen.end(),
                     [](const Seen& a, const Seen& b) { return a.time > b.time; });
    seen.resize(kPresenceMaxNames);
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
