// offline/lock_manager.hpp — pessimistic offline locks: locks that span the several requests
// of one business transaction ("editing post 42": open the editor, type for minutes, save),
// held by a session, not by a request (docs/OFFLINE_LOCKS.md).
//
//   offline::LockManager& m = ctx.offline;
//   auto grant = m.acquire("bbs/post/general/42", Kind::kExclusiveWrite,
//                          {ctx.session.owner(), "alice"}, 10min).value();
//   if (!grant.granted()) show_who_edits(grant.holders[0]);   // now, before they type
//   ...                                   // later requests: renew(), then release()
//
// The kinds are Fowler's (Patterns of Enterprise Application Architecture):
//   kExclusiveWrite  one owner may edit; anyone may read without a lock
//   kExclusiveRead   one owner may even read: nobody else reads or edits meanwhile
//   kRead / kWrite   the read/write kind: many readers at once, or one writer, never both
// Two different owners may hold one key at once only if both hold kRead. An owner that asks
// again for a key it holds renews it (and may change its kind if nobody else holds it).
//
// A request-scoped lock still guards every read-modify-write: an offline lock says who may
// edit, and the save takes the record's request lock, checks under it that its owner still
// holds the offline lock (holds()), and only then writes.
//
// Grants are atomic across processes and hosts (offline/state_store.hpp: one write transaction
// per decision, serialised per key, with a unique index that refuses a second exclusive
// holder). A lock whose time ran out is ignored at once and swept later (at most every
// ManagerOptions::sweep_interval, by whichever call comes). Denials say who holds the key and
// until when. Failures are store::Status values: store::Errc::kUnavailable when the store
// cannot be reached or stays busy (the app answers 503), std::errc::invalid_argument for a key
// that is not a valid lock name (a bug in the app). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/offline/state_store.hpp>
#include <kagi/store/status.hpp>

namespace kagi::offline {

enum class Kind { kExclusiveWrite, kExclusiveRead, kRead, kWrite };

// "exclusive-write", "exclusive-read", "read", "write".
std::string_view kind_name(Kind kind);
std::optional<Kind> parse_kind(std::string_view name);
// Whether two different owners may hold one key at once in these kinds (only read + read).
bool compatible(Kind held, Kind wanted);

// Who holds a lock: a stable id (a session's owner id, never its cookie) and a name to show.
struct Owner {
  std::string id;
  std::string name;
};

// One held lock. Times are milliseconds since the Unix epoch on the store's clock.
struct Holder {
  std::string key;
  Kind kind = Kind::kExclusiveWrite;
  std::string owner;
  std::string owner_name;
  int64_t since_ms = 0;
  int64_t expires_ms = 0;
};

struct Grant {
  enum Outcome { kGranted, kDenied, kTooMany };
  Outcome outcome = kDenied;
  int64_t expires_ms = 0;       // kGranted: when it runs out unless renewed
  int64_t now_ms = 0;           // the store's clock when the decision was made
  std::vector<Holder> holders;  // kDenied: who holds the key now (the conflicting holders)
  bool granted() const { return outcome == kGranted; }
};

// Kept by the store, so every process and host adds to the same numbers.
struct Counters {
  int64_t grants = 0;          // acquire / take_over that granted (renewals not counted)
  int64_t denials = 0;         // acquire refused: held by another owner, or too many
  int64_t expiries = 0;        // locks found run out (at a decision or by the sweep)
  int64_t takeovers = 0;       // locks taken from their owner by take_over
  int64_t releases = 0;        // release / release_all by the owner
  int64_t force_releases = 0;  // released by an admin
};

struct ManagerOptions {
  // Every ttl asked for is clamped to [min_ttl, max_ttl] (offline.max_ttl_s).
  std::chrono::milliseconds min_ttl{1000};
  std::chrono::milliseconds max_ttl{std::chrono::hours(1)};
  // The most live locks one owner holds at once (session.max_offline_locks): more → kTooMany.
  size_t max_per_owner = 16;
  // How often some call also removes every expired lock (0: at every call, for tests).
  std::chrono::milliseconds sweep_interval{std::chrono::seconds(60)};
};

class LockManager {
 public:
  LockManager(std::shared_ptr<StateStore> store, ManagerOptions options);

  // Grants `key` to `owner` in `kind` for `ttl` (clamped), or says why not. The key must be a
  // valid lock name (lock/detail/names.hpp: "bbs/post/general/42"), the owner id non-empty.
  store::Result<Grant> acquire(std::string_view key, Kind kind, const Owner& owner,
                               std::chrono::milliseconds ttl);
  // Gives up `owner`'s lock on `key`. False if it held none (expired, taken over, released).
  store::Result<bool> release(std::string_view key, std::string_view owner);
  // Gives up every lock of `owner` (a session that ends). Returns how many.
  store::Result<int64_t> release_all(std::string_view owner);
  // Extends `owner`'s live lock on `key` by the ttl it was granted with, from now. Returns the
  // new expiry, or 0 if the owner holds no live lock on it (it must acquire again).
  store::Result<int64_t> renew(std::string_view key, std::string_view owner);
  // The live holders of `key` (none, one, or several readers).
  store::Result<std::vector<Holder>> inspect(std::string_view key);
  // `owner`'s live lock on `key`, if it has one.
  store::Result<std::optional<Holder>> holds(std::string_view key, std::string_view owner);
  // Takes `key` from whoever holds it (the app decides when that is allowed) and grants it to
  // `new_owner`; each owner it was taken from is told on its next request (take_notices).
  store::Result<Grant> take_over(std::string_view key, Kind kind, const Owner& new_owner,
                                 std::chrono::milliseconds ttl);
  // For the admin: releases `owner`'s lock on `key` and tells the owner. False if not held.
  store::Result<bool> force_release(std::string_view key, std::string_view owner);
  // Every live lock, ordered by key, at most `limit`.
  store::Result<std::vector<Holder>> list(size_t limit = 1000);
  // What `owner` must be told (its lock was taken over or force-released), oldest first; each
  // is returned once.
  store::Result<std::vector<std::string>> take_notices(std::string_view owner);
  store::Result<Counters> counters();
  // Removes every expired lock now (also done by the calls above, at most every
  // sweep_interval). Returns how many.
  store::Result<int64_t> sweep();

  const ManagerOptions& options() const { return options_; }
  StateStore& store() { return *store_; }

 private:
  std::chrono::milliseconds clamp(std::chrono::milliseconds ttl) const;
  // Sweeps inside `tx` when the interval has passed (or always with interval 0).
  void maybe_sweep(Transaction& tx);

  std::shared_ptr<StateStore> store_;
  const ManagerOptions options_;
  std::atomic<int64_t> next_sweep_ms_{0};
};

}  // namespace kagi::offline
