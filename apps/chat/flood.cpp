#include "chat/flood.hpp"

#include <algorithm>

#include "common/tag_buckets.hpp"

namespace kagi::apps::chat {

std::string client_tag(std::string_view address, const util::Secret& secret) {
  return secret.tag("chat-client", address, 8);
}

std::string flood_lock_name(std::string_view tag) { return tag_bucket_lock("chat/flood", tag); }

std::string flood_path(std::string_view tag) { return tag_bucket_path("chat/flood", tag); }

SayVerdict take_say(std::string_view file_text, std::string_view tag, int64_t now_ms,
                    const SayLimit& limit) {
  const int64_t burst = std::max<int64_t>(1, limit.burst);
  const int64_t interval_ms = 60000 / std::max<int64_t>(1, limit.per_minute);
  const int64_t horizon = now_ms + burst * interval_ms;  // a full bucket's debt, at most

  int64_t full_at = now_ms;  // a client not in the file has a full bucket
  std::string kept;
  for_each_tag_line(file_text, [&](std::string_view t, int64_t at) {
    if (t == tag) {
      full_at = std::clamp(at, now_ms, horizon);  // clamped: the clock may have gone back
    } else if (at > now_ms) {                     // a full bucket needs no line
      append_tag_line(kept, t, at);
    }
  });

  const int64_t next = full_at + interval_ms;
  if (next > horizon) {
    const int64_t wait_ms = next - horizon;
    return {.allowed = false, .retry_after_s = std::max<int64_t>(1, (wait_ms + 999) / 1000)};
  }
  append_tag_line(kept, tag, next);
  return {.allowed = true, .new_text = std::move(kept)};
}

}  // namespace kagi::apps::chat
