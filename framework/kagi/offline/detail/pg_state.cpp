// The PostgreSQL StateStore: tables in the data's database, shared by every web host.
#include <cctype>
#include <string>

#include <kagi/offline/detail/schema.hpp>
#include <kagi/offline/detail/state_backends.hpp>
#include <kagi/pg/connection.hpp>
#include <kagi/pg/pool.hpp>

namespace kagi::offline::detail {
namespace {

using pg::Clock;

// Serialises schema creation between processes (the lock layer and the stores use the
// other numbers of this class).
constexpr std::string_view kSchemaLock = "SELECT pg_advisory_xact_lock(1801545577, 4)";
// The class of the per-key transaction locks: decisions about one offline lock key are made
// one at a time across every host.
constexpr std::string_view kKeyLockClass = "1801545578";
constexpr std::string_view kNowMs = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

// `sql` with ?N replaced by parameter N as a literal.
std::string with_literals(std::string_view sql, std::initializer_list<Value> params) {
  const std::vector<Value> values(params);
  std::string out;
  out.reserve(sql.size() + 32);
  for (size_t i = 0; i < sql.size(); ++i) {
    if (sql[i] != '?' || i + 1 >= sql.size() ||
        !std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      out += sql[i];
      continue;
    }
    size_t n = 0;
    while (i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      n = n * 10 + static_cast<size_t>(sql[++i] - '0');
    }
    if (n == 0 || n > values.size()) {
      throw TransactionFailure{
          store::Status(make_error_code(store::Errc::kDatabase),
                        "statement parameter ?" + std::to_string(n) + " has no value")};
    }
    const Value& v = values[n - 1];
    if (auto* number = std::get_if<int64_t>(&v)) {
      out += std::to_string(*number);
    } else if (auto* text = std::get_if<std::string_view>(&v)) {
      out += pg::quote_literal(*text);
    } else {
      out += "NULL";
    }
  }
  return out;
}

class PgState;

class PgTransaction : public Transaction {
 public:
  PgTransaction(pg::Connection& conn, std::string_view op, Clock::time_point deadline)
      : conn_(conn), op_(op), deadline_(deadline) {}

  Rows query(std::string_view sql, std::initializer_list<Value> params) override {
    return run(with_literals(sql, params));
  }
  void execute(std::string_view sql, std::initializer_list<Value> params) override {
    pending_ += with_literals(sql, params);
    pending_ += "; ";
  }
  // The statements execute() left for the end, then COMMIT: one message.
  std::string commit_message() {
    std::string out = begin_prefix() + pending_ + "COMMIT";
    pending_.clear();
    return out;
  }

  void lock_key(std::string_view key) override {
    // The clock is read after the lock: a decision sees the time it is made at.
    Rows rows = run("SELECT pg_advisory_xact_lock(" + std::string(kKeyLockClass) + ", hashtext(" +
                    pg::quote_literal(key) + ")), " + std::string(kNowMs));
    if (rows.size() == 1) now_ = rows.integer(0, 1);
  }

  int64_t now_ms() override {
    if (!now_) {
      Rows rows = run("SELECT " + std::string(kNowMs));
      now_ = rows.size() == 1 ? rows.integer(0, 0) : 0;
    }
    return *now_;
  }

  // Sends "BEGIN" with the first statement (one round trip less).
  std::string begin_prefix() {
    if (begun_) return {};
    begun_ = true;
    return "BEGIN; ";
  }
  bool begun() const { return begun_; }
  bool has_pending() const { return !pending_.empty(); }

 private:
  Rows run(std::string sql) {
    sql.insert(0, begin_prefix() + pending_);
    pending_.clear();
    pg::Reply reply;
    std::string why;
    const std::error_code ec = conn_.exec(sql, deadline_, reply, &why);
    if (ec) {
      const auto code = ec == pg::Errc::kQuery ? store::Errc::kDatabase : store::Errc::kUnavailable;
      throw TransactionFailure{
          store::Status(make_error_code(code), std::string(op_) + " (PostgreSQL): " + why)};
    }
    Rows rows;
    if (reply.size() == 0) return rows;
    const pg::Rows last = reply[reply.size() - 1];
    for (int r = 0; r < last.rows(); ++r) {
      std::vector<std::optional<std::string>> row;
      for (int c = 0; c < last.columns(); ++c) {
        if (last.is_null(r, c)) {
          row.emplace_back();
        } else {
          row.emplace_back(std::string(last.get(r, c)));
        }
      }
      rows.add_row(std::move(row));
    }
    return rows;
  }

  pg::Connection& conn_;
  std::string_view op_;
  Clock::time_point deadline_;
  std::optional<int64_t> now_;
  bool begun_ = false;
  std::string pending_;  // statements of execute() not sent yet
};

pg::PoolOptions pool_options(const StateOptions& options) {
  pg::PoolOptions p;
  p.connect = options.postgres;
  p.max = options.pool;
  return p;
}

class PgState : public StateStore {
 public:
  explicit PgState(const StateOptions& options) : options_(options), pool_(pool_options(options)) {}

  store::Status transaction(std::string_view op, TransactionKind,
                            const std::function<store::Status(Transaction&)>& work) override {
    const auto deadline = Clock::now() + options_.timeout;
    std::error_code ec;
    std::string why;
    auto conn = pool_.take(deadline, ec, &why);
    if (!conn) {
      return store::Status(make_error_code(store::Errc::kUnavailable),
                           std::string(op) + " (PostgreSQL): " + why);
    }
    PgTransaction tx(*conn, op, deadline);
    store::Status status;
    try {
      status = work(tx);
    } catch (const TransactionFailure& f) {
      status = f.status;
    }
    if (status.ok() && (tx.begun() || tx.has_pending())) {
      pg::Reply reply;
      std::string end_why;
      if (const std::error_code end = conn->exec(tx.commit_message(), deadline, reply, &end_why)) {
        const auto code =
            end == pg::Errc::kQuery ? store::Errc::kDatabase : store::Errc::kUnavailable;
        status = store::Status(make_error_code(code),
                               std::string(op) + " (PostgreSQL): commit: " + end_why);
      }
    }
    if (!status.ok() && tx.begun() && !conn->broken()) {
      pg::Reply reply;
      (void)conn->exec("ROLLBACK", deadline, reply, nullptr);  // a failure breaks it: closed below
    }
    pool_.give_back(std::move(conn));  // a broken one is closed there
    return status;
  }
  std::string_view backend() const override { return "postgres"; }

  // Creates the tables that are missing (a role that owns them needs no CREATE privilege
  // after the first start: nothing is created when all are there).
  bool prepare(std::string* why) {
    const store::Status status =
        transaction("create the offline tables", kReadWrite, [&](Transaction& tx) {
          std::string check = "SELECT ";
          for (const char* table : kTables) {
            if (check.size() > 7) check += " AND ";
            check += "to_regclass('" + std::string(table) + "') IS NOT NULL";
          }
          if (tx.query(check).text(0, 0) == "t") return store::Status();
          tx.query(kSchemaLock);
          tx.query(schema_sql("bigint"));
          return store::Status();
        });
    if (!status.ok() && why) *why = status.message();
    return status.ok();
  }

 private:
  const StateOptions options_;
  pg::Pool pool_;
};

}  // namespace

std::unique_ptr<StateStore> open_pg_state(const StateOptions& options, std::string* why) {
  auto state = std::make_unique<PgState>(options);
  if (!state->prepare(why)) return nullptr;
  return state;
}

}  // namespace kagi::offline::detail
