#include <kagi/store/detail/pg_schema.hpp>

#include <string_view>

namespace kagi::store::detail {
namespace {

// Step i takes the schema from version i to i + 1. Append steps; never edit a shipped one.
constexpr std::string_view kSteps[] = {
    // 0 → 1: files, logs as rows, fences.
    "CREATE TABLE kagi_files (path text PRIMARY KEY, version bigint NOT NULL, "
    "  bytes bytea NOT NULL); "
    "CREATE TABLE kagi_logs (path text PRIMARY KEY, generation bigint NOT NULL, "
    "  last_seq bigint NOT NULL); "
    "CREATE TABLE kagi_log_records (path text NOT NULL, seq bigint NOT NULL, "
    "  record bytea NOT NULL, PRIMARY KEY (path, seq)); "
    "CREATE SEQUENCE kagi_log_generations; "
    "CREATE TABLE kagi_fences (lock_name text PRIMARY KEY, epoch bigint NOT NULL); "
    "CREATE TABLE kagi_lock_domain (id integer PRIMARY KEY CHECK (id = 1), "
    "  domain text NOT NULL); "
    // Stamps `epoch` on the lock's row unless a newer epoch wrote already (then refuses).
    "CREATE FUNCTION kagi_fence(text, bigint) RETURNS void LANGUAGE plpgsql AS $f$ "
    "BEGIN "
    "  INSERT INTO kagi_fences AS f (lock_name, epoch) VALUES ($1, $2) "
    "    ON CONFLICT (lock_name) DO UPDATE SET epoch = EXCLUDED.epoch "
    "    WHERE f.epoch <= EXCLUDED.epoch; "
    "  IF NOT FOUND THEN "
    "    RAISE EXCEPTION 'kagi: a newer holder of lock % wrote meanwhile (this guard has epoch "
    "%)', $1, $2 USING ERRCODE = 'KG001'; "
    "  END IF; "
    "END $f$",
    // 1 → 2: the hot calls as functions, whose statements the server plans once per session
    // instead of at every call (a post is then a few cheap calls).
    "CREATE FUNCTION kagi_append(p_path text, p_lock text, p_epoch bigint, p_record bytea, "
    "  p_durable boolean) RETURNS bigint LANGUAGE plpgsql AS $f$ "
    "DECLARE s bigint; "
    "BEGIN "
    "  PERFORM set_config('synchronous_commit', CASE WHEN p_durable THEN 'on' ELSE 'off' END, "
    "    true); "
    "  IF p_epoch <> 0 THEN PERFORM kagi_fence(p_lock, p_epoch); END IF; "
    "  UPDATE kagi_logs l SET last_seq = l.last_seq + 1 WHERE l.path = p_path "
    "    RETURNING l.last_seq INTO s; "
    "  IF NOT FOUND THEN "
    "    INSERT INTO kagi_logs AS l (path, generation, last_seq) "
    "      VALUES (p_path, nextval('kagi_log_generations'), 1) "
    "      ON CONFLICT (path) DO UPDATE SET last_seq = l.last_seq + 1 RETURNING l.last_seq INTO s; "
    "  END IF; "
    "  INSERT INTO kagi_log_records (path, seq, record) VALUES (p_path, s, p_record); "
    "  RETURN s; "
    "END $f$; "
    "CREATE FUNCTION kagi_commit(p_path text, p_lock text, p_epoch bigint, p_bytes bytea, "
    "  p_durable boolean) RETURNS void LANGUAGE plpgsql AS $f$ "
    "BEGIN "
    "  PERFORM set_config('synchronous_commit', CASE WHEN p_durable THEN 'on' ELSE 'off' END, "
    "    true); "
    "  IF p_epoch <> 0 THEN PERFORM kagi_fence(p_lock, p_epoch); END IF; "
    "  INSERT INTO kagi_files AS f (path, version, bytes) VALUES (p_path, 1, p_bytes) "
    "    ON CONFLICT (path) DO UPDATE SET version = f.version + 1, bytes = EXCLUDED.bytes; "
    "END $f$; "
    // The log's generation on a first row (out_seq NULL), then the records after the cursor's
    // sequence number (all of them if the generation changed); no row: no such log.
    "CREATE FUNCTION kagi_read_since(p_path text, p_generation bigint, p_seq bigint) "
    "  RETURNS TABLE (out_generation bigint, out_seq bigint, out_record bytea) "
    "  LANGUAGE plpgsql STABLE AS $f$ "
    "DECLARE g bigint; "
    "BEGIN "
    "  SELECT l.generation INTO g FROM kagi_logs l WHERE l.path = p_path; "
    "  IF NOT FOUND THEN RETURN; END IF; "
    "  out_generation := g; out_seq := NULL; out_record := NULL; RETURN NEXT; "
    "  RETURN QUERY SELECT g, r.seq, r.record FROM kagi_log_records r "
    "    WHERE r.path = p_path AND r.seq > (CASE WHEN g = p_generation THEN p_seq ELSE 0 END) "
    "    ORDER BY r.seq; "
    "END $f$",
};
constexpr int kKnown = static_cast<int>(std::size(kSteps));

// Serialises the migrations of processes starting at once (the lock backend uses
// (1801545577, 1) for its own table).
constexpr std::string_view kMigrationLock = "1801545577, 2";

// Runs under kMigrationLock (a session lock: released on every path below, since a failed
// statement does not release it and the connection goes back to a pool).
std::error_code migrate_locked(pg::Connection& conn, int target, pg::Clock::time_point deadline,
                               std::string* why) {
  pg::Reply reply;
  // Created only when missing: CREATE ... IF NOT EXISTS needs CREATE on the schema even when
  // the table is there, and a role the DBA gave only its tables must still start.
  std::error_code ec =
      conn.exec("SELECT to_regclass('kagi_schema_version') IS NULL", deadline, reply, why);
  if (ec) return ec;
  if (reply.size() == 1 && reply[0].rows() == 1 && reply[0].get(0, 0) == "t") {
    ec = conn.exec("CREATE TABLE kagi_schema_version (version integer NOT NULL)", deadline, reply,
                   why);
    if (ec) return ec;
  }
  ec = conn.exec("SELECT COALESCE(max(version), 0) FROM kagi_schema_version", deadline, reply, why);
  if (ec) return ec;
  int version =
      reply.size() == 1 && reply[0].rows() == 1 ? static_cast<int>(reply[0].get_int(0, 0)) : 0;
  if (version > target || version > kKnown) {
    if (why) {
      *why = "the data is at schema version " + std::to_string(version) +
             ", newer than this kagi knows (" + std::to_string(target) +
             "): upgrade kagi on this host";
    }
    return make_error_code(pg::Errc::kQuery);
  }
  for (; version < target; ++version) {
    std::string sql(kSteps[version]);
    sql += "; DELETE FROM kagi_schema_version; INSERT INTO kagi_schema_version VALUES (" +
           std::to_string(version + 1) + ")";
    ec = conn.exec(sql, deadline, reply, why);
    if (ec) {
      if (why) {
        *why = "migrating the schema to version " + std::to_string(version + 1) + ": " + *why;
      }
      return ec;
    }
  }
  return {};
}

}  // namespace

std::error_code migrate(pg::Connection& conn, int target, pg::Clock::time_point deadline,
                        std::string* why) {
  pg::Reply reply;
  std::error_code ec = conn.exec("SELECT pg_advisory_lock(" + std::string(kMigrationLock) + ")",
                                 deadline, reply, why);
  if (ec) return ec;
  ec = migrate_locked(conn, target, deadline, why);
  if (!conn.broken()) {
    (void)conn.exec("SELECT pg_advisory_unlock(" + std::string(kMigrationLock) + ")", deadline,
                    reply, nullptr);
  }
  return ec;
}

}  // namespace kagi::store::detail
