// apps/bbs/flood.hpp — flood control across the whole site: "this client posted less than
// bbs.flood_interval_s ago, on any board".
//
// The state is shared by every worker process, so it lives in the data directory under a
// lock like any other data. One file for all clients would make every post on every board
// queue behind one lock; instead clients are spread over bucket files by their tag
// (common/tag_buckets.hpp), and a post locks only its own client's bucket (lock
// "bbs/flood/<bucket>") together with its board, as one set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <kagi/lock/guard.hpp>
#include <kagi/store/data_store.hpp>

namespace kagi::apps::bbs {

// The lock protecting `client_tag`'s flood record, and the file holding it.
std::string flood_lock_name(std::string_view client_tag);
std::string flood_path(std::string_view client_tag);

// Seconds until `client_tag` may post again (0 = now). Reads under `guard`.
int64_t flood_wait_s(const store::DataStore& data, const lock::Guard& guard,
                     std::string_view client_tag, int64_t now, int64_t interval_s);

// Records that `client_tag` posted at `now`; drops entries older than `interval_s`.
void flood_record(store::DataStore& data, const lock::ExclusiveGuard& guard,
                  std::string_view client_tag, int64_t now, int64_t interval_s);

}  // namespace kagi::apps::bbs
