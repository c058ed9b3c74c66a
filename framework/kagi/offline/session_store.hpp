// offline/session_store.hpp — server-side sessions: who a browser is across requests, so that
// it can own offline locks (offline/lock_manager.hpp). Apps use them through ctx.session
// (app/session.hpp), which keeps the cookie; this is the table behind it.
//
// A session is created on first use, never for a mere visit. Its cookie holds a random id
// (32 bytes from the kernel's CSPRNG, 64 hex characters); the table keeps only the id's
// SHA-256, so a copy of the table does not let anyone act as a session. Each session also has
// an `owner` id, the one its offline locks are held by: rotate() gives the session a new
// cookie id (after a privilege change, against session fixation) and keeps the owner, so the
// locks stay with the session.
//
// Bounds: a session unseen for SessionOptions::idle is gone (its cookie no longer loads it);
// at most max_sessions exist, and making one more first evicts the least recently seen (the
// idle ones go first), so a flood of new sessions cannot fill the disk. A session is "seen"
// when it is loaded; the table is written for that at most every touch_interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/offline/state_store.hpp>
#include <kagi/store/status.hpp>

namespace kagi::offline {

struct SessionRecord {
  std::string owner;  // the id its offline locks are held by (never shown to the browser)
  std::string name;   // a display name the app set ("" if none)
  int64_t created_ms = 0;
  int64_t seen_ms = 0;
};

struct SessionOptions {
  std::chrono::seconds idle{3600};  // session.idle_s
  size_t max_sessions = 100000;     // session.max_sessions
  std::chrono::seconds touch_interval{60};
};

class SessionStore {
 public:
  SessionStore(std::shared_ptr<StateStore> store, SessionOptions options);

  // A new session named `name`: its cookie id and its record.
  store::Result<std::pair<std::string, SessionRecord>> create(std::string_view name);
  // The live session whose cookie id is `id`; nullopt if there is none (unknown, ended, idle
  // too long, or not shaped like an id at all).
  store::Result<std::optional<SessionRecord>> load(std::string_view id);
  // A new cookie id for the session of `id` (same owner, name and locks); nullopt if `id`
  // loads no session. The old id stops working at once.
  store::Result<std::optional<std::string>> rotate(std::string_view id);
  store::Status set_name(std::string_view id, std::string_view name);
  // Ends the session of `id`. Returns its owner (to release its locks), or "" if none.
  store::Result<std::string> end(std::string_view id);
  // The session that owns `owner`'s locks, for the admin page (its age and name).
  store::Result<std::optional<SessionRecord>> by_owner(std::string_view owner);
  // Removes the sessions idle too long. Returns how many.
  store::Result<int64_t> sweep();
  store::Result<int64_t> count();

  // Has the shape of a cookie id (64 lowercase hex characters).
  static bool well_formed(std::string_view id);
  const SessionOptions& options() const { return options_; }

 private:
  std::shared_ptr<StateStore> store_;
  const SessionOptions options_;
};

}  // namespace kagi::offline
