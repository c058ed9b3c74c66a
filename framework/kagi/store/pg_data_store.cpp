#include <kagi/store/pg_data_store.hpp>

#include <utility>

#include <kagi/lock/errors.hpp>
#include <kagi/lock/lock_connection.hpp>
#include <kagi/pg/connection.hpp>
#include <kagi/pg/errors.hpp>
#include <kagi/store/detail/pg_feed.hpp>
#include <kagi/store/detail/pg_schema.hpp>
#include <kagi/store/detail/safe_path_walk.hpp>
#include <kagi/store/lock_domain_claim.hpp>
#include <kagi/store/path.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store {
namespace {

pg::PoolOptions pool_options(const PgDataOptions& options) {
  pg::PoolOptions p;
  p.connect = options.connect;
  p.max = options.pool;
  return p;
}

// The bytes of an `encode(..., 'hex')` column; kCorrupt if the server sent something else.
Status decode(std::string_view op, std::string_view path, std::string_view hex, std::string& out) {
  if (pg::decode_hex(hex, out)) return {};
  return Status::failed(Errc::kCorrupt, op, path, "the server's answer is not hex");
}

// The files store's split-brain guard (lock_domain_claim.hpp), in the database.
std::error_code claim_lock_domain(pg::Connection& conn, const PgDataOptions& options,
                                  pg::Clock::time_point deadline, std::string* why) {
  const std::string domain = pg::quote_literal(options.lock_domain);
  pg::Reply reply;
  std::error_code ec = conn.exec(
      "INSERT INTO kagi_lock_domain (id, domain) VALUES (1, " + domain +
          ") ON CONFLICT (id) DO NOTHING; SELECT domain FROM kagi_lock_domain WHERE id = 1",
      deadline, reply, why);
  if (ec) return ec;
  const std::string recorded(reply.size() == 1 && reply[0].rows() == 1 ? reply[0].get(0, 0) : "");
  if (recorded == options.lock_domain) return {};
  if (!options.adopt_lock_domain) {
    if (why) *why = foreign_lock_domain("the data in PostgreSQL", recorded, options.lock_domain);
    return make_error_code(Errc::kForeignLockDomain);
  }
  ec = conn.exec("UPDATE kagi_lock_domain SET domain = " + domain + " WHERE id = 1", deadline,
                 reply, why);
  if (!ec) {
    util::log_warn("the data in PostgreSQL was adopted by lock domain '" + options.lock_domain +
                   "' (it was written under '" + recorded +
                   "'): data.adopt_lock_domain = true; set it back to false");
  }
  return ec;
}

}  // namespace

std::unique_ptr<PgDataStore> PgDataStore::open(const PgDataOptions& options, std::error_code& ec,
                                               std::string* why) {
  std::unique_ptr<PgDataStore> store(new PgDataStore(options));
  const auto deadline = pg::Clock::now() + options.timeout;
  std::unique_ptr<pg::Connection> conn = store->pool_.take(deadline, ec, why);
  if (!conn) {
    ec = make_error_code(ec == pg::Errc::kBadOptions ? Errc::kDatabase : Errc::kUnavailable);
    return nullptr;
  }
  ec = detail::migrate(*conn, kSchemaVersion, deadline, why);
  if (!ec) ec = claim_lock_domain(*conn, options, deadline, why);
  store->pool_.give_back(std::move(conn));
  if (ec && ec.category() == pg::pg_category()) {
    ec = make_error_code(ec == pg::Errc::kQuery ? Errc::kDatabase : Errc::kUnavailable);
  }
  return ec ? nullptr : std::move(store);
}

PgDataStore::PgDataStore(const PgDataOptions& options)
    : options_(options), pool_(pool_options(options)) {}

PgDataStore::~PgDataStore() = default;

Status PgDataStore::run(std::string_view op, std::string_view path, const lock::Guard& guard,
                        const std::string& sql, pg::Reply& reply, bool write) const {
  if (Status s = detail::check_path(op, path); !s.ok()) return s;
  if (Status s = detail::check_held(op, path, guard); !s.ok()) return s;
  bindings_.note(op, path, guard.name());
  const auto deadline = pg::Clock::now() + options_.timeout;
  std::string why;
  std::error_code ec;
  bool on_lock = false;  // the statement went out on the connection holding the lock
  if (options_.on_lock_connection) {
    ec = lock::with_lock_connection(guard, [&](pg::Connection& conn) -> std::error_code {
      // A write first looks whether the server closed the connection while it was idle
      // (terminated, restarted): the lock went with it, and the refusal is then certain
      // rather than "may have been applied". Reads skip the look (a poll per page view).
      if (write && conn.closed_while_idle()) return make_error_code(lock::Errc::kFenceLost);
      on_lock = true;
      return conn.exec(sql, deadline, reply, &why);
    });
    if (!on_lock && ec != std::errc::operation_not_supported) {
      return Status::failed(ec, op, path, "lock '" + guard.name() + "'");
    }
  }
  if (!on_lock) {
    // The lock lives elsewhere: ask it first, as the files store does.
    if (write) {
      if (const std::error_code lost = guard.verify()) {
        return Status::failed(lost, op, path, "lock '" + guard.name() + "'");
      }
    }
    std::unique_ptr<pg::Connection> conn = pool_.take(deadline, ec, &why);
    if (!conn) return Status::failed(Errc::kUnavailable, op, path, why);
    ec = conn->exec(sql, deadline, reply, &why);
    pool_.give_back(std::move(conn));
  }
  if (!ec) return {};
  if (ec == pg::Errc::kQuery) {
    if (reply.sqlstate() == detail::kFenceRefused) {
      return Status::failed(lock::Errc::kFenceLost, op, path, why);
    }
    return Status::failed(Errc::kDatabase, op, path, why);
  }
  if (on_lock) {
    // The connection broke: the server ends its session and the lock with it.
    return Status::failed(lock::Errc::kFenceLost, op, path,
                          "the connection holding lock '" + guard.name() + "' broke" +
                              (write ? " during the write, which may or may not have been "
                                       "applied (" +
                                           why + ")"
                                     : " (" + why + ")"));
  }
  return Status::failed(Errc::kUnavailable, op, path, why);
}

std::string PgDataStore::write_prelude(const lock::Guard& guard) const {
  std::string sql = options_.fsync ? "SET LOCAL synchronous_commit = on; "
                                   : "SET LOCAL synchronous_commit = off; ";
  if (lock::epoch_is_ordered(guard.epoch())) {
    sql += "SELECT kagi_fence(" + pg::quote_literal(guard.name()) + ", " +
           std::to_string(guard.epoch()) + "); ";
  }
  return sql;
}

std::string PgDataStore::fenced_call(std::string_view function, std::string_view path,
                                     const lock::Guard& guard, std::string_view bytes) const {
  // The epoch is stamped only when it orders holders across processes (0: not stamped).
  const uint64_t epoch = lock::epoch_is_ordered(guard.epoch()) ? guard.epoch() : 0;
  std::string sql = "SELECT ";
  sql += function;
  sql += '(' + pg::quote_literal(path) + ", " + pg::quote_literal(guard.name()) + ", " +
         std::to_string(epoch) + ", ";
  pg::append_bytea(sql, bytes);
  sql += options_.fsync ? ", true)" : ", false)";
  return sql;
}

std::string PgDataStore::notice(std::string_view path) const {
  util::MutexLock lock(watched_mu_);
  for (const std::string& prefix : watched_) {
    if (path.starts_with(prefix)) {
      return "; SELECT pg_notify('" + std::string(detail::kChangeChannel) + "', " +
             pg::quote_literal(path) + ")";
    }
  }
  return {};
}

Result<std::string> PgDataStore::read(const lock::Guard& guard, std::string_view path) const {
  pg::Reply reply;
  const std::string sql =
      "SELECT encode(bytes, 'hex') FROM kagi_files WHERE path = " + pg::quote_literal(path);
  if (Status s = run("read", path, guard, sql, reply, false); !s.ok()) return s;
  std::string bytes;
  if (reply.size() == 1 && reply[0].rows() == 1) {
    if (Status s = decode("read", path, reply[0].get(0, 0), bytes); !s.ok()) return s;
  }
  return bytes;
}

Result<bool> PgDataStore::exists(const lock::Guard& guard, std::string_view path) const {
  pg::Reply reply;
  const std::string quoted = pg::quote_literal(path);
  const std::string sql = "SELECT EXISTS (SELECT 1 FROM kagi_files WHERE path = " + quoted +
                          ") OR EXISTS (SELECT 1 FROM kagi_logs WHERE path = " + quoted + ")";
  if (Status s = run("exists", path, guard, sql, reply, false); !s.ok()) return s;
  return reply.size() == 1 && reply[0].rows() == 1 && reply[0].get(0, 0) == "t";
}

Status PgDataStore::commit(const lock::ExclusiveGuard& guard, std::string_view path,
                           std::string_view bytes) {
  std::string sql = fenced_call("kagi_commit", path, guard, bytes) + notice(path);
  pg::Reply reply;
  return run("commit", path, guard, sql, reply, true);
}

Status PgDataStore::remove(const lock::ExclusiveGuard& guard, std::string_view path) {
  const std::string quoted = pg::quote_literal(path);
  std::string sql = write_prelude(guard);
  sql += "DELETE FROM kagi_files WHERE path = " + quoted +
         "; DELETE FROM kagi_log_records WHERE path = " + quoted +
         "; DELETE FROM kagi_logs WHERE path = " + quoted;
  sql += notice(path);
  pg::Reply reply;
  return run("remove", path, guard, sql, reply, true);
}

Status PgDataStore::append(const lock::ExclusiveGuard& guard, std::string_view path,
                           std::string_view record) {
  if (record.size() > kMaxRecord) {
    return Status::failed(Errc::kTooLarge, "append", path,
                          std::to_string(record.size()) + " bytes (limit 16 MiB)");
  }
  // One call: the log's row hands out the next sequence number (creating the log with a new
  // generation on its first record), and the record takes it (kagi_append, pg_schema.cpp).
  std::string sql = fenced_call("kagi_append", path, guard, record);
  sql += notice(path);
  pg::Reply reply;
  return run("append", path, guard, sql, reply, true);
}

Status PgDataStore::rewrite_log(const lock::ExclusiveGuard& guard, std::string_view path,
                                const std::vector<std::string>& records) {
  const std::string quoted = pg::quote_literal(path);
  std::string sql = write_prelude(guard);
  sql += "DELETE FROM kagi_log_records WHERE path = " + quoted +
         "; INSERT INTO kagi_logs AS l (path, generation, last_seq) VALUES (" + quoted +
         ", nextval('kagi_log_generations'), " + std::to_string(records.size()) +
         ") ON CONFLICT (path) DO UPDATE SET generation = EXCLUDED.generation, last_seq = "
         "EXCLUDED.last_seq";
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].size() > kMaxRecord) {
      return Status::failed(Errc::kTooLarge, "rewrite_log", path,
                            std::to_string(records[i].size()) + " bytes (limit 16 MiB)");
    }
    sql += i == 0 ? "; INSERT INTO kagi_log_records (path, seq, record) VALUES (" : ", (";
    sql += quoted + ", " + std::to_string(i + 1) + ", ";
    pg::append_bytea(sql, records[i]);
    sql += ')';
  }
  sql += notice(path);
  pg::Reply reply;
  return run("rewrite_log", path, guard, sql, reply, true);
}

Result<std::vector<std::string>> PgDataStore::read_log(const lock::Guard& guard,
                                                       std::string_view path, size_t last_n) const {
  std::string sql =
      "SELECT encode(record, 'hex') FROM (SELECT seq, record FROM kagi_log_records "
      "WHERE path = " +
      pg::quote_literal(path) + " ORDER BY seq DESC";
  if (last_n < static_cast<size_t>(INT64_MAX)) sql += " LIMIT " + std::to_string(last_n);
  sql += ") r ORDER BY seq";
  pg::Reply reply;
  if (Status s = run("read_log", path, guard, sql, reply, false); !s.ok()) return s;
  std::vector<std::string> records;
  if (reply.size() != 1) return records;
  records.resize(static_cast<size_t>(reply[0].rows()));
  for (int i = 0; i < reply[0].rows(); ++i) {
    if (Status s = decode("read_log", path, reply[0].get(i, 0), records[static_cast<size_t>(i)]);
        !s.ok()) {
      return s;
    }
  }
  return records;
}

Result<LogTail> PgDataStore::read_log_since(const lock::Guard& guard, std::string_view path,
                                            LogCursor& cursor) const {
  // One indexed range query (kagi_read_since): the log's generation on a first row, then its
  // records after the cursor's (all of them if the generation changed: the log was rewritten).
  const std::string sql =
      "SELECT out_generation, out_seq, encode(out_record, 'hex') FROM kagi_read_since(" +
      pg::quote_literal(path) + ", " + std::to_string(cursor.generation) + ", " +
      std::to_string(cursor.seq) + ")";
  pg::Reply reply;
  if (Status s = run("read_log", path, guard, sql, reply, false); !s.ok()) return s;
  LogTail tail;
  if (reply.size() != 1 || reply[0].rows() == 0) {
    // No such log (never written, or removed): the caller starts over with nothing.
    tail.restarted = true;
    cursor = LogCursor{};
    return tail;
  }
  const pg::Rows rows = reply[0];
  LogCursor next = cursor;
  next.generation = rows.get_int(0, 0);
  if (next.generation != cursor.generation) {
    tail.restarted = true;  // the whole log follows (as on a first read)
    next.seq = 0;
  }
  for (int i = 0; i < rows.rows(); ++i) {
    if (rows.is_null(i, 1)) continue;  // the log has no record after the cursor
    std::string record;
    if (Status s = decode("read_log", path, rows.get(i, 2), record); !s.ok()) return s;
    tail.records.push_back(std::move(record));
    next.seq = rows.get_int(i, 1);
  }
  cursor = next;
  return tail;
}

std::unique_ptr<ChangeFeed> PgDataStore::watch(std::string_view folder, std::error_code& ec) const {
  const std::optional<std::string> found = folder_prefix(folder);
  if (!found) {
    ec = make_error_code(Errc::kUnsafePath);
    return nullptr;
  }
  const std::string& prefix = *found;
  {
    util::MutexLock lock(watched_mu_);
    watched_.push_back(prefix);
  }
  std::string why;
  auto feed = detail::listen_for_changes(options_.connect, prefix, options_.timeout, ec, &why);
  if (!feed) ec = make_error_code(Errc::kUnavailable);
  return feed;
}

}  // namespace kagi::store
