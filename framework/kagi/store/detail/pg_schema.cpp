#include <kagi/store/detail/pg_schema.hpp>

#include <charconv>
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
  int version = 0;
  if (reply.size() == 1 && reply[0].rows() == 1) {
    const std::string_view text = reply[0].get(0, 0);
    std::from_chars(text.data(), text.data() + text.size(), version);
  }
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
