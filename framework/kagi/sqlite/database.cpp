#include <kagi/sqlite/database.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace kagi::sqlite {
namespace {

// A failed statement, thrown inside a transaction and turned into its Status there.
class Failure : public std::runtime_error {
 public:
  Failure(int code, const std::string& what) : std::runtime_error(what), code(code) {}
  int code;
};

[[noreturn]] void fail(sqlite3* db, int rc) {
  throw Failure(rc, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

// The database is locked by another writer past the busy timeout: a moment's unavailability
// (503), not a broken database.
bool busy(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

store::Status failed_status(std::string_view op, const Options& options, int rc,
                            const std::string& why) {
  const auto code = make_error_code(busy(rc) ? store::Errc::kUnavailable : store::Errc::kDatabase);
  std::string message(op);
  message += " (" + options.path + "): ";
  message += busy(rc) ? "the database stayed locked by another writer for longer than its busy "
                        "timeout: "
                      : "";
  message += why;
  return store::Status(code, std::move(message));
}

}  // namespace

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Statement& Statement::bind(int index, int64_t value) {
  if (int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) fail(db_, rc);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  if (int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                   SQLITE_UTF8);
      rc != SQLITE_OK) {
    fail(db_, rc);
  }
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) fail(db_, rc);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, rc);
}

int64_t Statement::run() {
  while (step()) {
  }
  return sqlite3_changes64(db_);
}

int Statement::columns() const { return sqlite3_column_count(stmt_); }

int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string_view Statement::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (!p) return {};
  return {p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

Connection::~Connection() {
  statements_.clear();  // finalized before the connection closes
  sqlite3_close_v2(db_);
}

Statement& Connection::statement(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    it->second->reset();
    return *it->second;
  }
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  if (int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
      rc != SQLITE_OK) {
    fail(db_, rc);
  }
  auto owned = std::unique_ptr<Statement>(new Statement(db_, stmt));
  Statement& out = *owned;
  statements_.emplace(sql, std::move(owned));
  return out;
}

int Connection::on_busy(void* self, int tries) {
  auto* conn = static_cast<Connection*>(self);
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0) conn->busy_since_ = now;
  if (now - conn->busy_since_ >= conn->busy_timeout_) return 0;  // give up: SQLITE_BUSY
  const auto pause = std::chrono::microseconds(50 << std::min(tries, 5));
  // A little jitter, so that writers that met once do not meet again at every try.
  std::this_thread::sleep_for(pause +
                              std::chrono::microseconds(std::hash<const void*>()(conn) % 32));
  return 1;
}

void Connection::exec(const std::string& sql) {
  char* error = nullptr;
  if (int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error); rc != SQLITE_OK) {
    std::string why = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw Failure(rc, why);
  }
}

std::unique_ptr<Database> Database::open(const Options& options, const std::string& schema,
                                         std::string* why) {
  // Made here, not by SQLite, so that it gets the data's private mode (SQLite gives its -wal
  // and -shm files the mode of the database file).
  const int fd = ::open(options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC,
                        options.group_readable ? 0640 : 0600);
  if (fd < 0) {
    if (why) *why = "cannot create " + options.path + ": " + std::strerror(errno);
    return nullptr;
  }
  ::close(fd);
  auto db = std::unique_ptr<Database>(new Database(options));
  auto conn = db->connect(why);
  if (!conn) return nullptr;
  // Processes that start together open a new database together, and switching it to WAL
  // answers "database is locked" at once (without the busy handler) while another process
  // does the same: such a setup is tried again until the busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + options.busy_timeout;
  for (int attempt = 0;; ++attempt) {
    try {
      conn->exec("PRAGMA journal_mode = WAL");
      conn->exec("BEGIN IMMEDIATE");
      try {
        conn->exec(schema);
        conn->exec("COMMIT");
      } catch (...) {
        conn->exec("ROLLBACK");
        throw;
      }
      break;
    } catch (const Failure& e) {
      if (busy(e.code) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(attempt, 5)));
        continue;
      }
      if (why) *why = "cannot set up " + options.path + ": " + e.what();
      return nullptr;
    }
  }
  util::MutexLock lock(db->mu_);
  db->idle_.push_back(std::move(conn));
  db->open_ = 1;
  return db;
}

Database::~Database() = default;

std::unique_ptr<Connection> Database::connect(std::string* why) const {
  sqlite3* handle = nullptr;
  const int rc = sqlite3_open_v2(options_.path.c_str(), &handle,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  auto conn = std::unique_ptr<Connection>(new Connection(handle));  // closes it on failure too
  if (rc != SQLITE_OK) {
    if (why) {
      *why = "cannot open " + options_.path + ": " +
             (handle ? sqlite3_errmsg(handle) : sqlite3_errstr(rc));
    }
    return nullptr;
  }
  conn->busy_timeout_ = options_.busy_timeout;
  sqlite3_busy_handler(handle, &Connection::on_busy, conn.get());
  try {
    conn->exec(options_.fsync ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
  } catch (const Failure& e) {
    if (why) *why = "cannot open " + options_.path + ": " + e.what();
    return nullptr;
  }
  return conn;
}

std::unique_ptr<Connection> Database::take(std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() + options_.busy_timeout;
  {
    util::MutexLock lock(mu_);
    while (idle_.empty() && open_ >= options_.max_connections) {
      if (freed_.wait_until(mu_, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_ >= options_.max_connections) {
        if (why) *why = "every connection is in use";
        return nullptr;
      }
    }
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
    ++open_;  // a place for the connection opened below
  }
  auto conn = connect(why);
  if (!conn) {
    util::MutexLock lock(mu_);
    --open_;
    freed_.notify_one();
  }
  return conn;
}

void Database::give_back(std::unique_ptr<Connection> conn) {
  util::MutexLock lock(mu_);
  idle_.push_back(std::move(conn));
  freed_.notify_one();
}

store::Status Database::transaction(std::string_view op, TransactionKind kind,
                                    const std::function<store::Status(Connection&)>& work) {
  std::string why;
  auto conn = take(&why);
  if (!conn) return failed_status(op, options_, SQLITE_BUSY, why);
  store::Status status;
  try {
    conn->statement(kind == kWrite ? "BEGIN IMMEDIATE" : "BEGIN").run();
    try {
      status = work(*conn);
      conn->statement(status.ok() ? "COMMIT" : "ROLLBACK").run();
    } catch (...) {
      try {
        conn->statement("ROLLBACK").run();
      } catch (const Failure&) {  // already rolled back by SQLite (e.g. after SQLITE_FULL)
      }
      throw;
    }
  } catch (const Failure& e) {
    status = failed_status(op, options_, e.code, e.what());
  }
  give_back(std::move(conn));
  return status;
}

}  // namespace kagi::sqlite
