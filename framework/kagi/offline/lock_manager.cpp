#include <kagi/offline/lock_manager.hpp>

#include <algorithm>

#include <kagi/lock/detail/names.hpp>
#include <kagi/offline/detail/state_backends.hpp>
#include <kagi/util/utf8.hpp>

namespace kagi::offline {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kColumns = "key, kind, owner, owner_name, since_ms, expires_ms";
constexpr size_t kMaxOwnerBytes = 64;
constexpr size_t kMaxNameBytes = 128;
// Notices nobody came back for are dropped after a day.
constexpr int64_t kNoticeLifeMs = 24 * 3600 * 1000;

std::vector<Holder> holders_from(const Rows& rows) {
  std::vector<Holder> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    out.push_back(Holder{.key = std::string(rows.text(r, 0)),
                         .kind = parse_kind(rows.text(r, 1)).value_or(Kind::kExclusiveRead),
                         .owner = std::string(rows.text(r, 2)),
                         .owner_name = std::string(rows.text(r, 3)),
                         .since_ms = rows.integer(r, 4),
                         .expires_ms = rows.integer(r, 5)});
  }
  return out;
}

std::string select(std::string_view where) {
  return "SELECT " + std::string(kColumns) + " FROM kagi_offline_locks WHERE " + std::string(where);
}

void count(Transaction& tx, std::string_view name, int64_t delta) {
  if (delta == 0) return;
  tx.execute(
      "INSERT INTO kagi_offline_counters (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO "
      "UPDATE SET value = kagi_offline_counters.value + excluded.value",
      {name, delta});
}

void tell(Transaction& tx, std::string_view owner, std::string_view message) {
  tx.execute("INSERT INTO kagi_offline_notices (owner, at_ms, message) VALUES (?1, ?2, ?3)",
             {owner, tx.now_ms(), message});
}

// Drops the expired locks of `key`, counting them.
void drop_expired(Transaction& tx, std::string_view key) {
  const Rows gone =
      tx.query("DELETE FROM kagi_offline_locks WHERE key = ?1 AND expires_ms <= ?2 RETURNING owner",
               {key, tx.now_ms()});
  count(tx, "expiries", static_cast<int64_t>(gone.size()));
}

// A name to show: one line, no control or bidi characters, at most kMaxNameBytes (cut on a
// character boundary).
std::string shown_name(std::string_view name) {
  std::string out = util::strip_bidi_controls(util::strip_control_chars(name, false));
  if (out.size() > kMaxNameBytes) {
    size_t cut = kMaxNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
  }
  return out;
}

store::Status invalid(std::string_view op, std::string_view what, const std::string& why) {
  return store::Status(std::make_error_code(std::errc::invalid_argument),
                       std::string(op) + ": " + std::string(what) + " " + why);
}

store::Status check_key(std::string_view op, std::string_view key) {
  std::string why;
  if (lock::validate_name(key, &why)) {
    return invalid(op, "offline lock key '" + std::string(key) + "'",
                   "is not a valid lock name: " + why);
  }
  return {};
}

store::Status check_owner(std::string_view op, std::string_view owner) {
  if (owner.empty() || owner.size() > kMaxOwnerBytes || !util::valid_utf8(owner)) {
    return invalid(op, "owner id", "must be 1-64 bytes of UTF-8 (a session's owner id)");
  }
  return {};
}

// Grants `key` to `owner` inside `tx` (the key's expired rows dropped and `others` read by the
// caller): renews the owner's own row, or inserts one if the owner is under its limit.
Grant grant(Transaction& tx, std::string_view key, Kind kind, const Owner& owner, milliseconds ttl,
            const std::optional<Holder>& own, size_t max_per_owner) {
  Grant g;
  g.now_ms = tx.now_ms();
  g.expires_ms = g.now_ms + ttl.count();
  const std::string name = shown_name(owner.name);
  if (own) {
    // Asked again: renewed, and the kind changes if the caller asked for another one (the
    // caller checked that nobody else's lock stands in the way). It is held since its grant.
    tx.execute(
        "UPDATE kagi_offline_locks SET kind = ?3, owner_name = ?4, expires_ms = ?5, ttl_ms = ?6, "
        "since_ms = CASE WHEN kind = ?3 THEN since_ms ELSE ?7 END WHERE key = ?1 AND owner = ?2",
        {key, owner.id, kind_name(kind), name, g.expires_ms, static_cast<int64_t>(ttl.count()),
         g.now_ms});
    g.outcome = Grant::kGranted;
    return g;
  }
  const Rows held =
      tx.query("SELECT count(*) FROM kagi_offline_locks WHERE owner = ?1 AND expires_ms > ?2",
               {owner.id, g.now_ms});
  if (static_cast<size_t>(held.integer(0, 0)) >= max_per_owner) {
    count(tx, "denials", 1);
    g.outcome = Grant::kTooMany;
    return g;
  }
  tx.execute(
      "INSERT INTO kagi_offline_locks (key, owner, kind, owner_name, since_ms, expires_ms, ttl_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
      {key, owner.id, kind_name(kind), name, g.now_ms, g.expires_ms,
       static_cast<int64_t>(ttl.count())});
  count(tx, "grants", 1);
  g.outcome = Grant::kGranted;
  return g;
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kExclusiveWrite:
      return "exclusive-write";
    case Kind::kExclusiveRead:
      return "exclusive-read";
    case Kind::kRead:
      return "read";
    case Kind::kWrite:
      return "write";
  }
  return "exclusive-read";
}

std::optional<Kind> parse_kind(std::string_view name) {
  for (Kind k : {Kind::kExclusiveWrite, Kind::kExclusiveRead, Kind::kRead, Kind::kWrite}) {
    if (kind_name(k) == name) return k;
  }
  return std::nullopt;
}

bool compatible(Kind held, Kind wanted) { return held == Kind::kRead && wanted == Kind::kRead; }

LockManager::LockManager(std::shared_ptr<StateStore> store, ManagerOptions options)
    : store_(std::move(store)), options_(options) {}

milliseconds LockManager::clamp(milliseconds ttl) const {
  return std::clamp(ttl, options_.min_ttl, std::max(options_.min_ttl, options_.max_ttl));
}

void LockManager::maybe_sweep(Transaction& tx) {
  const int64_t now = tx.now_ms();
  int64_t due = next_sweep_ms_.load(std::memory_order_relaxed);
  if (now < due) return;
  // One caller of this process sweeps per interval; the others go on.
  if (!next_sweep_ms_.compare_exchange_strong(due, now + options_.sweep_interval.count())) return;
  const Rows gone =
      tx.query("DELETE FROM kagi_offline_locks WHERE expires_ms <= ?1 RETURNING key", {now});
  count(tx, "expiries", static_cast<int64_t>(gone.size()));
  tx.execute("DELETE FROM kagi_offline_notices WHERE at_ms < ?1", {now - kNoticeLifeMs});
}

store::Result<Grant> LockManager::acquire(std::string_view key, Kind kind, const Owner& owner,
                                          milliseconds ttl) {
  constexpr std::string_view op = "offline acquire";
  if (auto s = check_key(op, key); !s.ok()) return s;
  if (auto s = check_owner(op, owner.id); !s.ok()) return s;
  ttl = clamp(ttl);
  Grant out;
  store::Status status = store_->transaction(op, kReadWrite, [&](Transaction& tx) {
    tx.lock_key(key);
    maybe_sweep(tx);
    drop_expired(tx, key);
    std::optional<Holder> own;
    std::vector<Holder> conflicting;
    for (Holder& h : holders_from(tx.query(select("key = ?1 ORDER BY since_ms"), {key}))) {
      if (h.owner == owner.id) {
        own = std::move(h);
      } else if (!compatible(h.kind, kind)) {
        conflicting.push_back(std::move(h));
      }
    }
    if (!conflicting.empty()) {
      count(tx, "denials", 1);
      out.outcome = Grant::kDenied;
      out.now_ms = tx.now_ms();
      out.holders = std::move(conflicting);
      return store::Status();
    }
    out = grant(tx, key, kind, owner, ttl, own, options_.max_per_owner);
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<bool> LockManager::release(std::string_view key, std::string_view owner) {
  constexpr std::string_view op = "offline release";
  if (auto s = check_key(op, key); !s.ok()) return s;
  bool released = false;
  store::Status status = store_->transaction(op, kReadWrite, [&](Transaction& tx) {
    tx.lock_key(key);
    maybe_sweep(tx);
    const Rows gone = tx.query(
        "DELETE FROM kagi_offline_locks WHERE key = ?1 AND owner = ?2 RETURNING expires_ms",
        {key, owner});
    released = gone.size() == 1 && gone.integer(0, 0) > tx.now_ms();
    count(tx, released ? "releases" : "expiries", static_cast<int64_t>(gone.size()));
    return store::Status();
  });
  if (!status.ok()) return status;
  return released;
}

store::Result<int64_t> LockManager::release_all(std::string_view owner) {
  int64_t released = 0;
  store::Status status =
      store_->transaction("offline release_all", kReadWrite, [&](Transaction& tx) {
        maybe_sweep(tx);
        const Rows gone = tx.query(
            "DELETE FROM kagi_offline_locks WHERE owner = ?1 RETURNING expires_ms", {owner});
        for (size_t r = 0; r < gone.size(); ++r) released += gone.integer(r, 0) > tx.now_ms();
        count(tx, "releases", released);
        count(tx, "expiries", static_cast<int64_t>(gone.size()) - released);
        return store::Status();
      });
  if (!status.ok()) return status;
  return released;
}

store::Result<int64_t> LockManager::renew(std::string_view key, std::string_view owner) {
  constexpr std::string_view op = "offline renew";
  if (auto s = check_key(op, key); !s.ok()) return s;
  int64_t expires = 0;
  store::Status status = store_->transaction(op, kReadWrite, [&](Transaction& tx) {
    tx.lock_key(key);
    maybe_sweep(tx);
    const Rows renewed = tx.query(
        "UPDATE kagi_offline_locks SET expires_ms = ?3 + ttl_ms WHERE key = ?1 AND owner = ?2 "
        "AND expires_ms > ?3 RETURNING expires_ms",
        {key, owner, tx.now_ms()});
    if (renewed.size() == 1) expires = renewed.integer(0, 0);
    return store::Status();
  });
  if (!status.ok()) return status;
  return expires;
}

store::Result<std::vector<Holder>> LockManager::inspect(std::string_view key) {
  constexpr std::string_view op = "offline inspect";
  if (auto s = check_key(op, key); !s.ok()) return s;
  std::vector<Holder> out;
  store::Status status = store_->transaction(op, kReadOnly, [&](Transaction& tx) {
    out = holders_from(
        tx.query(select("key = ?1 AND expires_ms > ?2 ORDER BY since_ms"), {key, tx.now_ms()}));
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<std::optional<Holder>> LockManager::holds(std::string_view key,
                                                        std::string_view owner) {
  constexpr std::string_view op = "offline holds";
  if (auto s = check_key(op, key); !s.ok()) return s;
  std::optional<Holder> out;
  store::Status status = store_->transaction(op, kReadOnly, [&](Transaction& tx) {
    auto rows = holders_from(
        tx.query(select("key = ?1 AND owner = ?2 AND expires_ms > ?3"), {key, owner, tx.now_ms()}));
    if (!rows.empty()) out = std::move(rows.front());
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<Grant> LockManager::take_over(std::string_view key, Kind kind, const Owner& new_owner,
                                            milliseconds ttl) {
  constexpr std::string_view op = "offline take_over";
  if (auto s = check_key(op, key); !s.ok()) return s;
  if (auto s = check_owner(op, new_owner.id); !s.ok()) return s;
  ttl = clamp(ttl);
  Grant out;
  store::Status status = store_->transaction(op, kReadWrite, [&](Transaction& tx) {
    tx.lock_key(key);
    maybe_sweep(tx);
    drop_expired(tx, key);
    std::optional<Holder> own;
    const std::string taker = shown_name(new_owner.name);
    for (Holder& h : holders_from(tx.query(select("key = ?1"), {key}))) {
      if (h.owner == new_owner.id) {
        own = std::move(h);
        continue;
      }
      // Readers beside a new reader are not in the way: only the incompatible ones go.
      if (compatible(h.kind, kind)) continue;
      tx.execute("DELETE FROM kagi_offline_locks WHERE key = ?1 AND owner = ?2", {key, h.owner});
      tell(tx, h.owner,
           "Your " + std::string(kind_name(h.kind)) + " lock on " + std::string(key) +
               " was taken over by " + (taker.empty() ? "another session" : taker) + ".");
      count(tx, "takeovers", 1);
    }
    out = grant(tx, key, kind, new_owner, ttl, own, options_.max_per_owner);
    // Over its limit the taker gets nothing: the locks it took stay given up (their owners
    // were told), which is what an admin-sanctioned take-over asked for.
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<bool> LockManager::force_release(std::string_view key, std::string_view owner) {
  constexpr std::string_view op = "offline force_release";
  if (auto s = check_key(op, key); !s.ok()) return s;
  bool released = false;
  store::Status status = store_->transaction(op, kReadWrite, [&](Transaction& tx) {
    tx.lock_key(key);
    const Rows gone = tx.query(
        "DELETE FROM kagi_offline_locks WHERE key = ?1 AND owner = ?2 RETURNING expires_ms, kind",
        {key, owner});
    released = gone.size() == 1 && gone.integer(0, 0) > tx.now_ms();
    if (released) {
      tell(tx, owner,
           "Your " + std::string(gone.text(0, 1)) + " lock on " + std::string(key) +
               " was released by an administrator.");
      count(tx, "force_releases", 1);
    } else {
      count(tx, "expiries", static_cast<int64_t>(gone.size()));
    }
    return store::Status();
  });
  if (!status.ok()) return status;
  return released;
}

store::Result<std::vector<Holder>> LockManager::list(size_t limit) {
  std::vector<Holder> out;
  store::Status status = store_->transaction("offline list", kReadOnly, [&](Transaction& tx) {
    out = holders_from(tx.query(select("expires_ms > ?1 ORDER BY key, since_ms LIMIT ?2"),
                                {tx.now_ms(), static_cast<int64_t>(limit)}));
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<std::vector<std::string>> LockManager::take_notices(std::string_view owner) {
  std::vector<std::string> out;
  // Almost always there is none: look first without taking the write lock.
  bool any = false;
  store::Status status = store_->transaction("offline notices", kReadOnly, [&](Transaction& tx) {
    any = !tx.query("SELECT 1 FROM kagi_offline_notices WHERE owner = ?1 LIMIT 1", {owner}).empty();
    return store::Status();
  });
  if (!status.ok()) return status;
  if (!any) return out;
  status = store_->transaction("offline notices", kReadWrite, [&](Transaction& tx) {
    const Rows rows = tx.query(
        "DELETE FROM kagi_offline_notices WHERE owner = ?1 RETURNING at_ms, message", {owner});
    std::vector<std::pair<int64_t, std::string>> sorted;
    for (size_t r = 0; r < rows.size(); ++r) {
      sorted.emplace_back(rows.integer(r, 0), std::string(rows.text(r, 1)));
    }
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [at, message] : sorted) out.push_back(std::move(message));
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<Counters> LockManager::counters() {
  Counters c;
  store::Status status = store_->transaction("offline counters", kReadOnly, [&](Transaction& tx) {
    const Rows rows = tx.query("SELECT name, value FROM kagi_offline_counters");
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::string_view name = rows.text(r, 0);
      const int64_t v = rows.integer(r, 1);
      if (name == "grants") c.grants = v;
      if (name == "denials") c.denials = v;
      if (name == "expiries") c.expiries = v;
      if (name == "takeovers") c.takeovers = v;
      if (name == "releases") c.releases = v;
      if (name == "force_releases") c.force_releases = v;
    }
    return store::Status();
  });
  if (!status.ok()) return status;
  return c;
}

store::Result<int64_t> LockManager::sweep() {
  int64_t swept = 0;
  store::Status status = store_->transaction("offline sweep", kReadWrite, [&](Transaction& tx) {
    const Rows gone = tx.query(
        "DELETE FROM kagi_offline_locks WHERE expires_ms <= ?1 RETURNING key", {tx.now_ms()});
    swept = static_cast<int64_t>(gone.size());
    count(tx, "expiries", swept);
    tx.query("DELETE FROM kagi_offline_notices WHERE at_ms < ?1", {tx.now_ms() - kNoticeLifeMs});
    return store::Status();
  });
  if (!status.ok()) return status;
  return swept;
}

}  // namespace kagi::offline
