// store/pg_data_store.hpp — the "postgres" DataStore (data.backend = "postgres"): the data of
// every web host of a site in one PostgreSQL database.
//
// Same API and rules as the files store (store/data_store.hpp); what changes is where the
// bytes live (docs/STORAGE.md, "Data on PostgreSQL"):
//
//   kagi_files        (path, version, bytes)           commit / read / exists / remove
//   kagi_logs         (path, generation, last_seq)     one row per log; a new generation at
//                                                      every rewrite_log
//   kagi_log_records  (path, seq, record)              primary key (path, seq): read_log_since
//                                                      is one range scan of that index
//   kagi_fences       (lock_name, epoch)               the newest epoch that wrote under a lock
//   kagi_lock_domain  (domain)                         the lock domain that writes the data
//   kagi_schema_version (version)                      created / migrated by open()
//
// Every call is one statement message (one round trip), run as one transaction.
//
// Fencing. When the locks are postgres advisory locks on the same database
// (PgDataOptions::on_lock_connection), every call runs on the connection that holds the
// guard's lock (lock/lock_connection.hpp): a lost lock is a dead connection, and a dead
// connection commits nothing. Otherwise (locks elsewhere) the guard is verified first, as the
// files store does. In both cases a write under an ordered epoch (lock::epoch_is_ordered)
// stamps it on the lock's row of kagi_fences in the same transaction, and is refused
// (lock::Errc::kFenceLost) if a newer holder of the lock already wrote: a stale writer cannot
// undo a newer one's write, even with locks and data on different servers.
//
// Durability. data.fsync = "always" runs every write with synchronous_commit = on (it returns
// once the commit is flushed to the server's WAL), "never" with synchronous_commit = off (a
// server crash may lose the last few hundred milliseconds of writes; never a torn one).
//
// Change notices. A write below a folder this process watches (watch()) also sends
// NOTIFY kagi_data '<path>' in its transaction: processes of one site run the same apps, so
// those are the folders any of them watches. Other writes send nothing (a NOTIFY serialises
// commits in the server).
//
// Errors: Errc::kUnavailable when the server cannot be reached or is out of connections (the
// app answers 503), kDatabase when it refuses a statement (privileges), and the lock layer's
// codes for fencing. A connection lost while a write was in flight fails it with kFenceLost
// (with locks on it) or kUnavailable: the transaction may or may not have committed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <kagi/pg/options.hpp>
#include <kagi/pg/pool.hpp>
#include <kagi/store/data_store.hpp>
#include <kagi/store/detail/lock_binding.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::store {

struct PgDataOptions {
  pg::ConnectOptions connect;  // data.postgres.dsn (default: locks.postgres.dsn)
  size_t pool = 16;            // data.postgres.pool: connections for calls not on a lock's
  bool fsync = true;           // data.fsync: synchronous_commit on / off
  // The lock backend is postgres on this same database: run calls on the lock's connection.
  bool on_lock_connection = false;
  std::chrono::milliseconds timeout{5000};  // each statement's deadline
  // The lock domain of this process's locks (lock::lock_domain), recorded in
  // kagi_lock_domain by the first process; another domain is refused at open() unless
  // `adopt_lock_domain` (data.adopt_lock_domain), as for a data.dir (lock_domain_claim.hpp).
  std::string lock_domain;
  bool adopt_lock_domain = false;
};

class PgDataStore final : public DataStore {
 public:
  // The schema version this build writes (kagi_schema_version).
  static constexpr int kSchemaVersion = 2;

  // Connects, creates or migrates the schema, claims the data for options.lock_domain, and
  // returns the store. Null with `ec` set and `why` saying what to do: unreachable server
  // (kUnavailable), a refused login, a role that may not create the tables, a schema newer
  // than this build (kDatabase), another lock domain (kForeignLockDomain).
  static std::unique_ptr<PgDataStore> open(const PgDataOptions& options, std::error_code& ec,
                                           std::string* why);
  ~PgDataStore() override;

  Result<std::string> read(const lock::Guard& guard, std::string_view path) const override;
  Result<bool> exists(const lock::Guard& guard, std::string_view path) const override;
  Status commit(const lock::ExclusiveGuard& guard, std::string_view path,
                std::string_view bytes) override;
  Status remove(const lock::ExclusiveGuard& guard, std::string_view path) override;
  Status append(const lock::ExclusiveGuard& guard, std::string_view path,
                std::string_view record) override;
  Status rewrite_log(const lock::ExclusiveGuard& guard, std::string_view path,
                     const std::vector<std::string>& records) override;
  Result<std::vector<std::string>> read_log(
      const lock::Guard& guard, std::string_view path,
      size_t last_n = std::numeric_limits<size_t>::max()) const override;
  Result<LogTail> read_log_since(const lock::Guard& guard, std::string_view path,
                                 LogCursor& cursor) const override;
  // LISTEN kagi_data on a connection of the feed's own (reconnected when it breaks, which
  // drain() reports as missed news).
  std::unique_ptr<ChangeFeed> watch(std::string_view folder, std::error_code& ec) const override;

  std::string_view backend() const override { return "postgres"; }
  bool fsync_enabled() const override { return options_.fsync; }
  uint64_t lock_mismatches() const override { return bindings_.mismatches(); }

 private:
  explicit PgDataStore(const PgDataOptions& options);

  // Checks the path and the guard, then runs `sql` (a whole statement message) on the lock's
  // connection or a pooled one and leaves its answer in `reply`.
  Status run(std::string_view op, std::string_view path, const lock::Guard& guard,
             const std::string& sql, pg::Reply& reply, bool write) const;
  // The start of a write's message: durability, then the fence stamp.
  std::string write_prelude(const lock::Guard& guard) const;
  // "SELECT <function>(path, lock, epoch, bytes, durable)": a write done by one of the schema's
  // functions (they set the durability and stamp the epoch themselves).
  std::string fenced_call(std::string_view function, std::string_view path,
                          const lock::Guard& guard, std::string_view bytes) const;
  // The NOTIFY for `path` if it is below a watched folder, else "".
  std::string notice(std::string_view path) const KAGI_EXCLUDES(watched_mu_);

  const PgDataOptions options_;
  mutable pg::Pool pool_;
  mutable detail::LockBindings bindings_;
  mutable util::Mutex watched_mu_;
  mutable std::vector<std::string> watched_ KAGI_GUARDED_BY(watched_mu_);  // "folder/" prefixes
};

}  // namespace kagi::store
