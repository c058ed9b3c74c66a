// admin/offline_status.hpp — the offline locks (offline/lock_manager.hpp) on the admin
// surfaces: the "Offline locks" table of /admin/locks with its force-release buttons,
// "offline" in /admin/locks.json, the kagi_offline_* metrics and kagi-locks' table. They come
// from the table every process and host shares, so every host shows the same ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <kagi/offline/lock_manager.hpp>
#include <kagi/offline/session_store.hpp>

namespace kagi::util {
class JsonWriter;
}
namespace kagi::view {
class Dict;
}

namespace kagi::apps::admin {

struct OfflineLockRow {
  offline::Holder lock;
  std::optional<int64_t> session_age_ms;  // since its owner's session began; none if it ended
};

struct OfflineStatus {
  int64_t now_ms = 0;
  std::vector<OfflineLockRow> locks;  // by key
  offline::Counters counters;
  std::string error;  // non-empty: the table could not be read (why); the rest is empty
};

// The live offline locks (at most `limit`) with their owners' session ages, and the counters.
// A store that cannot be read is reported in `error`; this never throws.
OfflineStatus collect_offline(offline::LockManager& locks, offline::SessionStore& sessions,
                              size_t limit = 1000);

void write_offline_json(util::JsonWriter& w, const OfflineStatus& s);
void offline_metrics(const OfflineStatus& s, std::string& out);
void offline_text(const OfflineStatus& s, std::string& out);
void offline_dict(const OfflineStatus& s, view::Dict& dict);

}  // namespace kagi::apps::admin
