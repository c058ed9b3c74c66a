#include <kagi/offline/detail/schema.hpp>

namespace kagi::offline::detail {

std::string schema_sql(const std::string& integer) {
  const std::string& i = integer;
  return
      // A session: the cookie's id is never stored, only its SHA-256 (id_hash), so a copy of
      // the table does not let anyone act as its sessions. `owner` is the id offline locks are
      // held by: it stays when the cookie's id is replaced (fixation), so locks stay too.
      "CREATE TABLE IF NOT EXISTS kagi_sessions (id_hash text PRIMARY KEY, owner text NOT NULL "
      "UNIQUE, name text NOT NULL, created_ms " +
      i + " NOT NULL, seen_ms " + i +
      " NOT NULL);"
      "CREATE INDEX IF NOT EXISTS kagi_sessions_seen ON kagi_sessions (seen_ms);"
      // An offline lock: one row per (key, owner). Several rows of one key only for the
      // read kind; the partial unique index refuses a second exclusive row on any path.
      "CREATE TABLE IF NOT EXISTS kagi_offline_locks (key text NOT NULL, owner text NOT NULL, "
      "kind text NOT NULL, owner_name text NOT NULL, since_ms " +
      i + " NOT NULL, expires_ms " + i + " NOT NULL, ttl_ms " + i +
      " NOT NULL, PRIMARY KEY (key, owner));"
      "CREATE UNIQUE INDEX IF NOT EXISTS kagi_offline_one_exclusive ON kagi_offline_locks (key) "
      "WHERE kind <> 'read';"
      "CREATE INDEX IF NOT EXISTS kagi_offline_locks_owner ON kagi_offline_locks (owner);"
      "CREATE INDEX IF NOT EXISTS kagi_offline_locks_expires ON kagi_offline_locks "
      "(expires_ms);"
      // What an owner is told on its next request (a lock taken over or force-released).
      "CREATE TABLE IF NOT EXISTS kagi_offline_notices (owner text NOT NULL, at_ms " +
      i +
      " NOT NULL, message text NOT NULL);"
      "CREATE INDEX IF NOT EXISTS kagi_offline_notices_owner ON kagi_offline_notices (owner);"
      // Grants, denials, expiries ...: counted where every process and host sees them.
      "CREATE TABLE IF NOT EXISTS kagi_offline_counters (name text PRIMARY KEY, value " +
      i + " NOT NULL);";
}

}  // namespace kagi::offline::detail
