#include "chat/flood.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace kagi::apps::chat {
namespace {

int bucket_of(std::string_view tag) {
  unsigned value = 0;
  std::from_chars(tag.data(), tag.data() + std::min<size_t>(4, tag.size()), value, 16);
  return static_cast<int>(value % kFloodBuckets);
}

std::string bucket_text(std::string_view tag) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d", bucket_of(tag));
  return buf;
}

// Calls fn(tag, full_at_ms) for each well-formed "tag full_at_ms" line.
template <typename Fn>
void for_each_entry(std::string_view text, Fn fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0) continue;
    std::string_view number = line.substr(space + 1);
    int64_t full_at = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), full_at);
    if (ec != std::errc() || end != number.data() + number.size()) continue;
    fn(line.substr(0, space), full_at);
  }
}

}  // namespace

std::string client_tag(std::string_view address, const util::Secret& secret) {
  return secret.tag("chat-client", address, 8);
}

std::string flood_lock_name(std::string_view tag) { return "chat/flood/" + bucket_text(tag); }

std::string flood_path(std::string_view tag) { return "chat/flood/" + bucket_text(tag) + ".txt"; }

SayVerdict take_say(std::string_view file_text, std::string_view tag, int64_t now_ms,
                    const SayLimit& limit) {
  const int64_t burst = std::max<int64_t>(1, limit.burst);
  const int64_t interval_ms = 60000 / std::max<int64_t>(1, limit.per_minute);
  const int64_t horizon = now_ms + burst * interval_ms;  // a full bucket's debt, at most

  int64_t full_at = now_ms;  // a client not in the file has a full bucket
  std::string kept;
  for_each_entry(file_text, [&](std::string_view t, int64_t at) {
    if (t == tag) {
      full_at = std::clamp(at, now_ms, horizon);  // clamped: the clock may have gone back
    } else if (at > now_ms) {                     // a full bucket needs no line
      kept.append(t).append(" ").append(std::to_string(at)).append("\n");
    }
  });

  const int64_t next = full_at + interval_ms;
  if (next > horizon) {
    const int64_t wait_ms = next - horizon;
    return {.allowed = false, .retry_after_s = std::max<int64_t>(1, (wait_ms + 999) / 1000)};
  }
  kept.append(tag).append(" ").append(std::to_string(next)).append("\n");
  return {.allowed = true, .new_text = std::move(kept)};
}

}  // namespace kagi::apps::chat
