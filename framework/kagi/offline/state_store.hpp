// offline/state_store.hpp — where the state that outlives a request lives: sessions
// (offline/session_store.hpp) and offline locks (offline/lock_manager.hpp).
//
// Two implementations behind one small SQL interface, chosen by data.backend:
//
//   files     SQLite, the file <data.dir>/offline.sqlite3 (WAL mode): every process of one
//             host; a write transaction holds the database's write lock, so every decision
//             is atomic across them.
//   postgres  tables kagi_sessions, kagi_offline_* in the data's database: every web host; a
//             write transaction first takes a transaction-scoped advisory lock on the key it
//             decides about, and unique indexes refuse what a decision must never allow.
//
// A transaction runs statements written once for both: `?1`, `?2` ... are parameters
// (bound by SQLite, sent as literals to PostgreSQL), and only SQL both accept is used (INSERT
// ... ON CONFLICT, RETURNING). Times are milliseconds since the Unix epoch on the store's clock
// (now_ms()): the host's clock for SQLite, the database server's for PostgreSQL, so hosts
// with skewed clocks still agree on when a lock runs out.
//
// Errors are store::Status values: kUnavailable when the database cannot be reached or stays
// busy past the deadline (the app answers 503), kDatabase when it refuses a statement.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <kagi/pg/options.hpp>
#include <kagi/store/status.hpp>

namespace kagi::offline {

// A statement parameter.
using Value = std::variant<int64_t, std::string_view, std::nullptr_t>;

// The rows a statement returned, as text (NULL is nullopt).
class Rows {
 public:
  size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  std::string_view text(size_t row, size_t column) const;  // "" for NULL
  int64_t integer(size_t row, size_t column) const;        // 0 for NULL or not a number
  bool is_null(size_t row, size_t column) const;

  void add_row(std::vector<std::optional<std::string>> row) { rows_.push_back(std::move(row)); }

 private:
  std::vector<std::vector<std::optional<std::string>>> rows_;
};

// One transaction of a StateStore. Each call throws on failure (caught by
// StateStore::transaction, which rolls back and returns the Status).
class Transaction {
 public:
  virtual ~Transaction() = default;
  // Runs one statement with its parameters and returns its rows (none for most writes).
  virtual Rows query(std::string_view sql, std::initializer_list<Value> params = {}) = 0;
  // Runs a statement whose rows are not needed: PostgreSQL sends it with the next query or
  // the commit (one round trip less), so its failure may be reported there.
  virtual void execute(std::string_view sql, std::initializer_list<Value> params = {}) = 0;
  // Serialises this transaction with every other one that calls it for `key` until it ends
  // (SQLite: already true of every write transaction).
  virtual void lock_key(std::string_view key) = 0;
  // The store's clock, read once per transaction.
  virtual int64_t now_ms() = 0;
};

enum TransactionKind { kReadOnly, kReadWrite };

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Runs `work` in one transaction; commits when it returns ok, rolls back otherwise.
  virtual store::Status transaction(std::string_view op, TransactionKind kind,
                                    const std::function<store::Status(Transaction&)>& work) = 0;
  virtual std::string_view backend() const = 0;  // "sqlite" | "postgres"
};

struct StateOptions {
  std::string backend = "sqlite";           // "sqlite" | "postgres"
  std::string dir;                          // sqlite: the folder of offline.sqlite3 (data.dir)
  bool fsync = true;                        // data.fsync: flush every commit
  bool group_readable = false;              // data.group_readable
  pg::ConnectOptions postgres;              // postgres: where (data.postgres.dsn)
  size_t pool = 4;                          // postgres: the most connections
  std::chrono::milliseconds timeout{2000};  // the longest a transaction waits for its turn
};

// Opens the store and creates the tables that are missing. Null with `why` set if it cannot
// (a folder that cannot be written, a server that cannot be reached, a role without
// privileges), saying what to do.
std::unique_ptr<StateStore> open_state_store(const StateOptions& options, std::string* why);

// The SQLite file's name in its folder.
inline constexpr std::string_view kSqliteFile = "offline.sqlite3";

}  // namespace kagi::offline
