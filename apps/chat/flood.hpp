// apps/chat/flood.hpp — flood control for say: each client may say chat.say_burst messages
// at once, then chat.say_per_minute per minute; beyond that it gets 429 + Retry-After.
//
// It is a token bucket per client: the bucket holds `burst` tokens, a say takes one, and one
// comes back every 60 / per_minute seconds. Stored as the one number that says it all (the
// "generic cell rate algorithm"): the time at which the client's bucket is full again. A say
// at `now` moves that time `interval` later (from `now` if it was already past); the say is
// refused when that would put it more than `burst` intervals ahead of `now`.
//
// The state is host-wide, like the BBS's flood control: every worker process of the host
// must see the same buckets, or N processes would allow N times the rate. So it lives in the
// data directory under a lock, spread over small files by client tag (common/tag_buckets.hpp)
// ("chat/flood/<bucket>.txt", lock "chat/flood/<bucket>"), one "tag full_at_ms" line per
// client whose bucket is not full. A say locks only its client's bucket file, and never
// together with its room (one chat lock at a time). These functions are the pure part; the
// handler reads and commits the file (chat.cpp).
#pragma once

#include <kagi/util/secret.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace kagi::apps::chat {

struct SayLimit {
  int64_t per_minute = 30;  // chat.say_per_minute; 0: no limit (the caller does not ask)
  int64_t burst = 10;       // chat.say_burst, at least 1
};

// A stable tag for a client address: 16 hex characters of an HMAC under the server secret,
// the same in every process and across restarts. Neither the address nor an unkeyed hash of
// it (every IPv4 address can be hashed in seconds) is written to disk.
std::string client_tag(std::string_view address, const util::Secret& secret);

// The lock protecting `tag`'s bucket, and the file holding it (under data.dir).
std::string flood_lock_name(std::string_view tag);
std::string flood_path(std::string_view tag);

struct SayVerdict {
  bool allowed = false;
  // Refused: whole seconds until the client may say one message (at least 1).
  int64_t retry_after_s = 0;
  // Allowed: the bucket file's new text (this client updated, full buckets of others
  // dropped), to commit under the same lock the old text was read under.
  std::string new_text{};
};

// Decides one say by `tag` at `now_ms` (unix milliseconds) against `file_text`, the bucket
// file as read under its lock. Malformed lines are dropped. A clock that went back is not
// held against the client beyond one full bucket.
SayVerdict take_say(std::string_view file_text, std::string_view tag, int64_t now_ms,
                    const SayLimit& limit);

}  // namespace kagi::apps::chat
