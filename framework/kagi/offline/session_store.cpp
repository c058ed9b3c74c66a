#include <kagi/offline/session_store.hpp>

#include <kagi/util/random.hpp>
#include <kagi/util/sha256.hpp>
#include <kagi/util/utf8.hpp>

namespace kagi::offline {
namespace {

constexpr size_t kMaxNameBytes = 128;

std::string id_hash(std::string_view id) { return util::to_hex(util::sha256(id)); }

std::string clean_name(std::string_view name) {
  std::string out = util::strip_bidi_controls(util::strip_control_chars(name, false));
  if (out.size() > kMaxNameBytes) {
    size_t cut = kMaxNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
  }
  return out;
}

std::optional<SessionRecord> record_from(const Rows& rows) {
  if (rows.empty()) return std::nullopt;
  return SessionRecord{.owner = std::string(rows.text(0, 0)),
                       .name = std::string(rows.text(0, 1)),
                       .created_ms = rows.integer(0, 2),
                       .seen_ms = rows.integer(0, 3)};
}

constexpr std::string_view kColumns = "owner, name, created_ms, seen_ms";

}  // namespace

SessionStore::SessionStore(std::shared_ptr<StateStore> store, SessionOptions options)
    : store_(std::move(store)), options_(options) {}

bool SessionStore::well_formed(std::string_view id) {
  if (id.size() != 64) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

store::Result<std::pair<std::string, SessionRecord>> SessionStore::create(std::string_view name) {
  std::pair<std::string, SessionRecord> out;
  out.first = util::random_hex(32);
  out.second.owner = util::random_hex(16);
  out.second.name = clean_name(name);
  const std::string hash = id_hash(out.first);
  const int64_t idle_ms = std::chrono::milliseconds(options_.idle).count();
  store::Status status = store_->transaction("create a session", kReadWrite, [&](Transaction& tx) {
    const int64_t now = tx.now_ms();
    tx.query("DELETE FROM kagi_sessions WHERE seen_ms <= ?1", {now - idle_ms});
    const int64_t live = tx.query("SELECT count(*) FROM kagi_sessions").integer(0, 0);
    const int64_t over = live - static_cast<int64_t>(options_.max_sessions) + 1;
    if (over > 0) {
      // Full: the least recently seen make room.
      tx.query(
          "DELETE FROM kagi_sessions WHERE id_hash IN (SELECT id_hash FROM kagi_sessions ORDER BY "
          "seen_ms LIMIT ?1)",
          {over});
    }
    tx.query(
        "INSERT INTO kagi_sessions (id_hash, owner, name, created_ms, seen_ms) VALUES (?1, ?2, ?3, "
        "?4, ?4)",
        {hash, out.second.owner, out.second.name, now});
    out.second.created_ms = out.second.seen_ms = now;
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<std::optional<SessionRecord>> SessionStore::load(std::string_view id) {
  if (!well_formed(id)) return std::optional<SessionRecord>();
  const std::string hash = id_hash(id);
  const int64_t idle_ms = std::chrono::milliseconds(options_.idle).count();
  const int64_t touch_ms = std::chrono::milliseconds(options_.touch_interval).count();
  std::optional<SessionRecord> out;
  bool stale = false;  // seen long enough ago to be written as seen now
  store::Status status = store_->transaction("load a session", kReadOnly, [&](Transaction& tx) {
    out = record_from(tx.query("SELECT " + std::string(kColumns) +
                                   " FROM kagi_sessions WHERE id_hash = ?1 AND seen_ms > ?2",
                               {hash, tx.now_ms() - idle_ms}));
    stale = out && tx.now_ms() - out->seen_ms >= touch_ms;
    return store::Status();
  });
  if (!status.ok()) return status;
  if (!stale) return out;
  // Seen: written now and then only, not at every request.
  status = store_->transaction("touch a session", kReadWrite, [&](Transaction& tx) {
    tx.query("UPDATE kagi_sessions SET seen_ms = ?2 WHERE id_hash = ?1", {hash, tx.now_ms()});
    out->seen_ms = tx.now_ms();
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<std::optional<std::string>> SessionStore::rotate(std::string_view id) {
  if (!well_formed(id)) return std::optional<std::string>();
  std::optional<std::string> fresh = util::random_hex(32);
  const int64_t idle_ms = std::chrono::milliseconds(options_.idle).count();
  store::Status status =
      store_->transaction("rotate a session id", kReadWrite, [&](Transaction& tx) {
        const Rows changed = tx.query(
            "UPDATE kagi_sessions SET id_hash = ?2, seen_ms = ?3 WHERE id_hash = ?1 AND seen_ms > "
            "?4 "
            "RETURNING owner",
            {id_hash(id), id_hash(*fresh), tx.now_ms(), tx.now_ms() - idle_ms});
        if (changed.empty()) fresh.reset();
        return store::Status();
      });
  if (!status.ok()) return status;
  return fresh;
}

store::Status SessionStore::set_name(std::string_view id, std::string_view name) {
  if (!well_formed(id)) return store::Status();
  return store_->transaction("name a session", kReadWrite, [&](Transaction& tx) {
    tx.query("UPDATE kagi_sessions SET name = ?2 WHERE id_hash = ?1",
             {id_hash(id), clean_name(name)});
    return store::Status();
  });
}

store::Result<std::string> SessionStore::end(std::string_view id) {
  std::string owner;
  if (!well_formed(id)) return owner;
  store::Status status = store_->transaction("end a session", kReadWrite, [&](Transaction& tx) {
    const Rows gone =
        tx.query("DELETE FROM kagi_sessions WHERE id_hash = ?1 RETURNING owner", {id_hash(id)});
    if (!gone.empty()) owner = std::string(gone.text(0, 0));
    return store::Status();
  });
  if (!status.ok()) return status;
  return owner;
}

store::Result<std::optional<SessionRecord>> SessionStore::by_owner(std::string_view owner) {
  std::optional<SessionRecord> out;
  store::Status status = store_->transaction("find a session", kReadOnly, [&](Transaction& tx) {
    out = record_from(tx.query(
        "SELECT " + std::string(kColumns) + " FROM kagi_sessions WHERE owner = ?1", {owner}));
    return store::Status();
  });
  if (!status.ok()) return status;
  return out;
}

store::Result<int64_t> SessionStore::sweep() {
  int64_t swept = 0;
  const int64_t idle_ms = std::chrono::milliseconds(options_.idle).count();
  store::Status status = store_->transaction("sweep sessions", kReadWrite, [&](Transaction& tx) {
    swept = static_cast<int64_t>(
        tx.query("DELETE FROM kagi_sessions WHERE seen_ms <= ?1 RETURNING owner",
                 {tx.now_ms() - idle_ms})
            .size());
    return store::Status();
  });
  if (!status.ok()) return status;
  return swept;
}

store::Result<int64_t> SessionStore::count() {
  int64_t n = 0;
  store::Status status = store_->transaction("count sessions", kReadOnly, [&](Transaction& tx) {
    n = tx.query("SELECT count(*) FROM kagi_sessions").integer(0, 0);
    return store::Status();
  });
  if (!status.ok()) return status;
  return n;
}

}  // namespace kagi::offline
