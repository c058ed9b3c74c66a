// sqlite/database.hpp — a SQLite database file that the threads and processes of one host
// share: the default home of sessions and offline locks (docs/OFFLINE_LOCKS.md).
//
//   auto db = sqlite::Database::open({.path = dir + "/offline.sqlite3"}, kSchema, &why);
//   store::Status s = db->transaction("acquire", sqlite::kWrite, [&](sqlite::Connection& c) {
//     auto& q = c.statement("SELECT owner FROM locks WHERE key = ?1");
//     q.bind(1, key);
//     while (q.step()) owner = q.text(0);
//     return store::Status();
//   });
//
// Why SQLite: a write transaction (BEGIN IMMEDIATE) holds the database's write lock, so a
// decision made in it — "nobody holds this key, so grant it" — is atomic across every process
// of the host, with no check-then-insert race. WAL mode lets readers run beside the writer.
// The file must be on a local filesystem (SQLite's locks are not reliable on NFS): several
// web hosts keep this state in PostgreSQL instead.
//
// Every wait is bounded: a transaction that cannot get the write lock within
// Options::busy_timeout fails with store::Errc::kUnavailable (the app answers 503), never
// waits longer. A failed statement rolls its transaction back; the Status names the operation
// and SQLite's reason.
//
// Thread-safe: each transaction runs on a connection of its own from a small pool (at most
// Options::max_connections; a caller beyond waits up to busy_timeout). Open it in the process
// that uses it (after any fork()).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kagi/store/status.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

struct sqlite3;
struct sqlite3_stmt;

namespace kagi::sqlite {

struct Options {
  std::string path;  // the database file (created with its folder's permissions: see below)
  std::chrono::milliseconds busy_timeout{2000};
  // true: every commit is flushed to disk (synchronous = FULL); false: a power cut may lose
  // the last commits, never corrupt the file (synchronous = NORMAL in WAL mode).
  bool fsync = true;
  size_t max_connections = 8;
  bool group_readable = false;  // file mode 0640 instead of 0600
};

// One prepared statement of a Connection, reset and rebound for each use. Failures throw
// inside Database::transaction(), which turns them into its Status.
class Statement {
 public:
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are numbered from 1 (?1, ?2 ...). Text is copied.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, std::string_view text);
  Statement& bind_null(int index);

  // Runs to the next row: true when one is ready (read it with the accessors), false when the
  // statement is done. Throws on failure.
  bool step();
  // Runs a statement that returns no rows (or ignores them) to the end. Returns the rows it
  // changed.
  int64_t run();

  int columns() const;
  int64_t integer(int column) const;
  std::string_view text(int column) const;  // valid until the next step()
  bool is_null(int column) const;

 private:
  friend class Connection;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  void reset();
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class Connection {
 public:
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // The statement for `sql`, prepared on first use and kept for the connection's life, reset
  // and with its parameters cleared. `sql` must be one statement.
  Statement& statement(const std::string& sql);
  // Runs statements that take no parameters (schema, PRAGMA). Throws on failure.
  void exec(const std::string& sql);

 private:
  friend class Database;
  explicit Connection(sqlite3* db) : db_(db) {}
  // SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries, so eight writers
  // of a host queue for tens of milliseconds behind a commit that takes one. This one retries
  // after 50 µs, doubling to 2 ms, until the busy timeout.
  static int on_busy(void* self, int tries);
  sqlite3* db_;
  std::chrono::milliseconds busy_timeout_{0};
  std::chrono::steady_clock::time_point busy_since_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> statements_;
};

enum TransactionKind { kRead, kWrite };

class Database {
 public:
  // Opens (creating it if missing) the database, switches it to WAL mode and runs `schema`
  // (statements that create what is missing: CREATE TABLE IF NOT EXISTS ...) in one write
  // transaction. Null with `why` set when the file cannot be opened or the schema fails.
  static std::unique_ptr<Database> open(const Options& options, const std::string& schema,
                                        std::string* why);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs `work` in one transaction: kWrite takes the database's write lock first (BEGIN
  // IMMEDIATE), so nothing changes between what `work` reads and what it writes. Commits if
  // `work` returns ok, rolls back otherwise (its Status is returned) or when a statement
  // fails (the Status says which operation, `op`, failed and why).
  store::Status transaction(std::string_view op, TransactionKind kind,
                            const std::function<store::Status(Connection&)>& work)
      KAGI_EXCLUDES(mu_);

  const Options& options() const { return options_; }

 private:
  explicit Database(const Options& options) : options_(options) {}
  std::unique_ptr<Connection> connect(std::string* why) const;
  std::unique_ptr<Connection> take(std::string* why) KAGI_EXCLUDES(mu_);
  void give_back(std::unique_ptr<Connection> conn) KAGI_EXCLUDES(mu_);

  const Options options_;
  util::Mutex mu_;
  util::CondVar freed_;
  std::vector<std::unique_ptr<Connection>> idle_ KAGI_GUARDED_BY(mu_);
  size_t open_ KAGI_GUARDED_BY(mu_) = 0;
};

}  // namespace kagi::sqlite
