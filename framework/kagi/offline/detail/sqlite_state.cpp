// The SQLite StateStore: <dir>/offline.sqlite3, shared by every process of one host.
#include <chrono>

#include <kagi/offline/detail/schema.hpp>
#include <kagi/offline/detail/state_backends.hpp>
#include <kagi/sqlite/database.hpp>

namespace kagi::offline::detail {
namespace {

class SqliteTransaction : public Transaction {
 public:
  explicit SqliteTransaction(sqlite::Connection& conn) : conn_(conn) {}

  Rows query(std::string_view sql, std::initializer_list<Value> params) override {
    sqlite::Statement& stmt = conn_.statement(std::string(sql));
    int index = 1;
    for (const Value& v : params) {
      if (auto* n = std::get_if<int64_t>(&v)) {
        stmt.bind(index, *n);
      } else if (auto* t = std::get_if<std::string_view>(&v)) {
        stmt.bind(index, *t);
      } else {
        stmt.bind_null(index);
      }
      ++index;
    }
    Rows rows;
    while (stmt.step()) {
      std::vector<std::optional<std::string>> row;
      for (int c = 0; c < stmt.columns(); ++c) {
        if (stmt.is_null(c)) {
          row.emplace_back();
        } else {
          row.emplace_back(std::string(stmt.text(c)));
        }
      }
      rows.add_row(std::move(row));
    }
    return rows;
  }

  void execute(std::string_view sql, std::initializer_list<Value> params) override {
    (void)query(sql, params);
  }

  // A write transaction (BEGIN IMMEDIATE) holds the database's write lock: nothing else
  // decides about any key until it ends.
  void lock_key(std::string_view) override {}

  int64_t now_ms() override {
    if (!now_) {
      now_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    }
    return *now_;
  }

 private:
  sqlite::Connection& conn_;
  std::optional<int64_t> now_;
};

class SqliteState : public StateStore {
 public:
  explicit SqliteState(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}

  store::Status transaction(std::string_view op, TransactionKind kind,
                            const std::function<store::Status(Transaction&)>& work) override {
    return db_->transaction(op, kind == kReadWrite ? sqlite::kWrite : sqlite::kRead,
                            [&](sqlite::Connection& conn) {
                              SqliteTransaction tx(conn);
                              try {
                                return work(tx);
                              } catch (const TransactionFailure& f) {
                                return f.status;
                              }
                            });
  }
  std::string_view backend() const override { return "sqlite"; }

 private:
  std::unique_ptr<sqlite::Database> db_;
};

}  // namespace

std::unique_ptr<StateStore> open_sqlite_state(const StateOptions& options, std::string* why) {
  sqlite::Options db;
  db.path = options.dir + "/" + std::string(kSqliteFile);
  db.busy_timeout = options.timeout;
  db.fsync = options.fsync;
  db.group_readable = options.group_readable;
  auto opened = sqlite::Database::open(db, schema_sql("INTEGER"), why);
  if (!opened) return nullptr;
  return std::make_unique<SqliteState>(std::move(opened));
}

}  // namespace kagi::offline::detail
