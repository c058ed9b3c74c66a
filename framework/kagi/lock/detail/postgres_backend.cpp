// The `postgres` backend: PostgreSQL session advisory locks, one pooled connection per lock
// context (docs/LOCKING.md, "The postgres backend").
//
// A context's first lock takes a connection from the process's pool and keeps it until the
// request ends; every lock of the request is a session advisory lock on it, so the server
// releases all of them the moment that connection ends (process killed, host gone, network
// cut: see pg/options.hpp for the keepalive bounds). A name becomes a 64-bit key (the first 8
// bytes of SHA-256 of the name); each process registers the names it uses in the table
// kagi_lock_names (key → name), which refuses a second name on a key (a collision, refused
// like the local backend refuses two names on one lock file) and lets the admin page show
// names for other hosts' locks.
//
// Fencing epochs: an exclusive grant's epoch comes from the sequence kagi_lock_epochs, read
// in the same statement as the lock, so it is larger than the epoch of every earlier grant of
// the name on any host (lock/guard.hpp). Without the sequence (a role that may not create it)
// epochs are this process's counter, marked unordered, and storage fences by connection only.
//
// Waits run in the server: `SET lock_timeout` to the time left, then pg_advisory_lock; the
// server ends the wait at the deadline with SQLSTATE 55P03 (and a deadlock with 40P01 after
// deadlock_timeout), both a timeout here. The client waits for the answer until the deadline
// plus LockOptions::postgres_grace, then gives the connection up.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <unordered_set>
#include <utility>
#include <vector>

#include <kagi/lock/detail/backend.hpp>
#include <kagi/lock/detail/holder_text.hpp>
#include <kagi/lock/detail/log.hpp>
#include <kagi/lock/detail/names.hpp>
#include <kagi/lock/detail/postgres_keys.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/pg/errors.hpp>
#include <kagi/pg/pool.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock {
namespace {

using pg::Clock;

constexpr std::string_view kLockTimeout = "55P03";  // lock_not_available
constexpr std::string_view kDeadlock = "40P01";     // deadlock_detected

// Names this process registered in kagi_lock_names. Bounded: when full it starts over (a
// name registered twice costs one more INSERT that does nothing).
class RegisteredNames {
 public:
  static constexpr size_t kMax = 65536;
  bool contains(std::string_view name) const KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    return names_.find(name) != names_.end();  // no copy of the name: this is per acquire
  }
  void add(std::string_view name) KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    if (names_.size() >= kMax) names_.clear();
    names_.emplace(name);
  }
  void forget_all() KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    names_.clear();
  }

 private:
  mutable util::Mutex mu_;
  std::unordered_set<std::string, NameHash, std::equal_to<>> names_ KAGI_GUARDED_BY(mu_);
};

class PostgresBackend;

class PostgresSession : public Session {
 public:
  PostgresSession(PostgresBackend& backend, const HolderInfo& who);
  ~PostgresSession() override { end_request(); }

  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                          uint64_t& epoch, void*& handle, bool* contended) override;
  std::error_code try_acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                              uint64_t& epoch, void*& handle) override;
  void release(std::string_view name, Mode mode, void* handle) noexcept override;
  std::error_code verify(std::string_view name, uint64_t epoch,
                         void* handle) const noexcept override;
  bool takes_sets_at_once() const override { return true; }
  std::error_code acquire_set(std::span<SetEntry> entries, Clock::time_point deadline) override;
  std::error_code with_connection(void* handle, const ConnectionWork& work) override;
  void end_request() noexcept override;
  std::string last_error() const override;
  bool lost_held_locks() const noexcept override { return lost_.load(std::memory_order_acquire); }

 private:
  // A release the watchdog asked for while the request's thread was using the connection.
  struct PendingRelease {
    int64_t key;
    Mode mode;
    uint64_t generation;
  };

  // Makes sure a connection is pinned (taken from the pool on first use).
  std::error_code pin(Clock::time_point deadline) KAGI_REQUIRES(mu_);
  // Runs `sql_` (after the request comment) on the pinned connection. A broken connection is
  // dropped here: every lock on it is gone (the server released them when it ended).
  std::error_code run(Clock::time_point deadline) const KAGI_REQUIRES(mu_);
  // Registers `names` in kagi_lock_names if this process has not yet; kNameCollision if one
  // of them is taken by another name.
  std::error_code register_names(std::span<const std::string_view> names,
                                 Clock::time_point deadline) KAGI_REQUIRES(mu_);
  std::error_code take(std::string_view name, Mode mode, bool wait, Clock::time_point deadline,
                       uint64_t& epoch, void*& handle) KAGI_REQUIRES(mu_);
  // Pins a connection and runs `attempt` (register the names, build and run one lock
  // statement), once more on a fresh connection if the pinned one turns out dead while this
  // request holds nothing on it. A server's refusal comes back as kTimeout (lock_timeout,
  // deadlock) or kBackend, the statement's answer left in reply_.
  template <typename Attempt>
  std::error_code lock_statement(Clock::time_point deadline, Attempt attempt) KAGI_REQUIRES(mu_);
  void unlock(int64_t key, Mode mode, uint64_t generation) const noexcept KAGI_REQUIRES(mu_);
  void drain_pending() const noexcept KAGI_REQUIRES(mu_) KAGI_EXCLUDES(pending_mu_);
  void drop_connection() const noexcept KAGI_REQUIRES(mu_);
  std::error_code failed(std::error_code ec, std::string why) const KAGI_REQUIRES(mu_);
  // "SET lock_timeout = <ms left>; " or kTimeout if no time is left.
  std::error_code begin_wait(Clock::time_point deadline) const KAGI_REQUIRES(mu_);

  PostgresBackend& backend_;
  const std::string comment_;  // "/*kagi <request id> <method> <path> */ ": pg_stat_activity
  // The request's thread uses the connection under mu_; the watchdog only tries it (release).
  mutable util::Mutex mu_;
  mutable std::unique_ptr<pg::Connection> conn_ KAGI_GUARDED_BY(mu_);
  // Counts the connections this session pinned: a handle is the generation it was granted
  // on, so a lock granted on a connection that has since broken is known lost.
  mutable uint64_t generation_ KAGI_GUARDED_BY(mu_) = 0;
  mutable size_t held_ KAGI_GUARDED_BY(mu_) = 0;  // locks held on conn_
  mutable std::string sql_ KAGI_GUARDED_BY(mu_);
  mutable pg::Reply reply_ KAGI_GUARDED_BY(mu_);
  mutable std::string last_error_ KAGI_GUARDED_BY(mu_);
  mutable util::Mutex pending_mu_;
  mutable std::vector<PendingRelease> pending_ KAGI_GUARDED_BY(pending_mu_);
  // The connection ended while the request held locks on it: they are gone, the context
  // fences their guards, and the request takes no more until it ends (end_request()).
  mutable std::atomic<bool> lost_{false};
};

class PostgresBackend : public Backend {
 public:
  explicit PostgresBackend(const LockOptions& options)
      : options_(options), pool_(pool_options(options)) {}

  std::string_view kind() const override { return "postgres"; }
  std::unique_ptr<Session> open_session(const HolderInfo& who) override {
    return std::make_unique<PostgresSession>(*this, who);
  }
  size_t active_names() const override { return active_.load(std::memory_order_relaxed); }

  const LockOptions& options() const { return options_; }
  pg::Pool& pool() { return pool_; }
  RegisteredNames& registered() { return registered_; }
  bool names_table() const { return names_table_.load(std::memory_order_relaxed); }
  // Whether kagi_lock_epochs is there to number exclusive grants (see above).
  bool epoch_sequence() const {
    return table_ready_.load(std::memory_order_relaxed) &&
           epochs_usable_.load(std::memory_order_relaxed);
  }
  // The table cannot be made or written (no privilege): go on without it, said once.
  void lose_names_table(const std::string& why) {
    if (names_table_.exchange(false)) {
      log_event("postgres locks: table kagi_lock_names is not usable (" + why +
                "); lock names of other hosts will not be shown and name collisions are "
                "checked within each process only. Create it as the site's database owner: "
                "CREATE UNLOGGED TABLE kagi_lock_names (key bigint PRIMARY KEY, name text NOT "
                "NULL); CREATE SEQUENCE kagi_lock_epochs; GRANT SELECT, INSERT ON kagi_lock_names "
                "TO <kagi's role>; GRANT USAGE ON kagi_lock_epochs TO <kagi's role>;");
    }
  }
  // An unordered epoch, for shared grants and when the sequence is missing.
  uint64_t next_epoch() {
    return (epoch_.fetch_add(1, std::memory_order_relaxed) + 1) | kUnorderedEpoch;
  }
  void count_active(ptrdiff_t delta) {
    active_.fetch_add(static_cast<size_t>(delta), std::memory_order_relaxed);
  }

 private:
  pg::PoolOptions pool_options(const LockOptions& options) {
    pg::PoolOptions p;
    p.connect = options.postgres;
    p.max = options.postgres_pool;
    p.on_connect = [this](pg::Connection& conn, Clock::time_point deadline) {
      prepare(conn, deadline);
    };
    return p;
  }
  // On each new connection, while the table is not known to exist: create what is missing of
  // it and the epoch sequence (serialised between processes by a transaction lock; created
  // only when missing, because even CREATE ... IF NOT EXISTS needs CREATE on the schema, which
  // a role given only these objects lacks), then check that this role may use them. The
  // sequence is logged: after a crash it must not count again from 1. A new connection may
  // also follow a server restart, which empties an unlogged table, so the names this process
  // registered are registered again.
  void prepare(pg::Connection& conn, Clock::time_point deadline) {
    registered_.forget_all();
    if (!names_table() || table_ready_.load(std::memory_order_relaxed)) return;
    pg::Reply reply;
    std::string why;
    const std::error_code ec = conn.exec(
        "SELECT pg_advisory_xact_lock(1801545577, 1); "
        "DO $$ BEGIN "
        "IF to_regclass('kagi_lock_names') IS NULL THEN CREATE UNLOGGED TABLE kagi_lock_names "
        "(key bigint PRIMARY KEY, name text NOT NULL); END IF; "
        "IF to_regclass('kagi_lock_epochs') IS NULL THEN CREATE SEQUENCE kagi_lock_epochs; "
        "END IF; END $$; "
        "SELECT has_table_privilege('kagi_lock_names', 'SELECT, INSERT'), "
        "has_sequence_privilege('kagi_lock_epochs', 'USAGE')",
        deadline, reply, &why);
    if (ec == pg::Errc::kQuery) {
      lose_names_table(why);
      return;
    }
    if (ec || reply.size() != 2 || reply[1].rows() != 1) return;  // tried on the next connection
    if (reply[1].get(0, 0) != "t") {
      lose_names_table("this role may not read and insert into it");
      return;
    }
    epochs_usable_.store(reply[1].get(0, 1) == "t", std::memory_order_relaxed);
    if (reply[1].get(0, 1) != "t") {
      log_event(
          "postgres locks: this role may not use the sequence kagi_lock_epochs; exclusive "
          "grants get unordered epochs, so data on PostgreSQL is fenced by connection only. "
          "GRANT USAGE ON kagi_lock_epochs TO <kagi's role>;");
    }
    table_ready_.store(true, std::memory_order_relaxed);
  }

  const LockOptions options_;
  pg::Pool pool_;
  RegisteredNames registered_;
  std::atomic<bool> names_table_{true};
  std::atomic<bool> table_ready_{false};
  std::atomic<bool> epochs_usable_{false};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<size_t> active_{0};  // held + waited for in this process
};

// The request in a comment every statement starts with: pg_stat_activity shows it, and the
// encoding (detail/holder_text.hpp) keeps anything the client sent from ending the comment.
std::string make_comment(const HolderInfo& who) {
  // The space before the end: a path ending in '/' must not make "/*" with the closing star.
  return "/*kagi " + detail::holder_fields(who) + " */ ";
}

std::string_view lock_function(Mode mode, bool wait) {
  if (wait) return mode == Mode::kShared ? "pg_advisory_lock_shared" : "pg_advisory_lock";
  return mode == Mode::kShared ? "pg_try_advisory_lock_shared" : "pg_try_advisory_lock";
}

std::string_view unlock_function(Mode mode) {
  return mode == Mode::kShared ? "pg_advisory_unlock_shared" : "pg_advisory_unlock";
}

// Appends "SELECT <function>(<key>)".
void append_call(std::string& sql, std::string_view function, int64_t key) {
  sql += "SELECT ";
  sql += function;
  sql += '(';
  sql += std::to_string(key);
  sql += ')';
}

// A lock statement the server refused: its wait ran out (lock_timeout) or it was picked to end
// a deadlock; anything else is a failure of the backend.
std::error_code refusal(std::string_view sqlstate) {
  return make_error_code(sqlstate == kLockTimeout || sqlstate == kDeadlock ? Errc::kTimeout
                                                                           : Errc::kBackend);
}

// The second column of a lock statement that drew an epoch.
constexpr std::string_view kNextEpoch = ", nextval('kagi_lock_epochs')";

// The epoch in `row`, `column` of the reply's first statement; 0 if there is none.
uint64_t epoch_from(const pg::Reply& reply, int row, int column) {
  if (reply.size() == 0 || reply[0].rows() <= row || reply[0].columns() <= column) return 0;
  const int64_t value = reply[0].get_int(row, column);  // a sequence value: 1 .. 2^63 - 1
  return value > 0 ? static_cast<uint64_t>(value) : 0;
}

void* handle_of(uint64_t generation) { return reinterpret_cast<void*>(generation); }
uint64_t generation_of(void* handle) { return reinterpret_cast<uint64_t>(handle); }

PostgresSession::PostgresSession(PostgresBackend& backend, const HolderInfo& who)
    : backend_(backend), comment_(make_comment(who)) {}

std::error_code PostgresSession::failed(std::error_code ec, std::string why) const {
  last_error_ = std::move(why);
  return ec;
}

void PostgresSession::drop_connection() const noexcept {
  if (!conn_) return;
  if (held_ > 0) lost_.store(true, std::memory_order_release);
  backend_.count_active(-static_cast<ptrdiff_t>(held_));
  held_ = 0;
  if (conn_->broken()) {
    backend_.pool().give_back(std::move(conn_));  // the pool also drops its idle ones
  } else {
    backend_.pool().discard(std::move(conn_));  // ending the session releases what it holds
  }
}

std::error_code PostgresSession::pin(Clock::time_point deadline) {
  if (conn_ && !conn_->broken()) return {};
  drop_connection();
  std::error_code ec;
  std::string why;
  conn_ = backend_.pool().take(deadline, ec, &why);
  if (!conn_) return failed(make_error_code(Errc::kUnavailable), why);
  ++generation_;
  return {};
}

std::error_code PostgresSession::run(Clock::time_point deadline) const {
  std::string why;
  const std::error_code ec = conn_->exec(sql_, deadline, reply_, &why);
  if (!ec) return {};
  if (ec == pg::Errc::kQuery) {
    last_error_ = std::move(why);
    return ec;  // the caller reads reply_.sqlstate()
  }
  drop_connection();
  return failed(make_error_code(Errc::kUnavailable), why);
}

std::error_code PostgresSession::begin_wait(Clock::time_point deadline) const {
  // Rounded up: the server must not end the wait before the caller's deadline.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return make_error_code(Errc::kTimeout);
  sql_ = comment_;
  sql_ += "SET lock_timeout = ";
  sql_ += std::to_string(left.count());
  sql_ += "; ";
  return {};
}

std::error_code PostgresSession::register_names(std::span<const std::string_view> names,
                                                Clock::time_point deadline) {
  if (!backend_.names_table()) return {};
  std::vector<std::string_view> fresh;
  for (std::string_view name : names) {
    if (!backend_.registered().contains(name)) fresh.push_back(name);
  }
  if (fresh.empty()) return {};
  // Two names of one request on one key: a collision this process can see by itself.
  for (size_t i = 0; i < fresh.size(); ++i) {
    for (size_t j = i + 1; j < fresh.size(); ++j) {
      if (postgres_key(fresh[i]) == postgres_key(fresh[j])) {
        return failed(make_error_code(Errc::kNameCollision),
                      "'" + std::string(fresh[i]) + "' and '" + std::string(fresh[j]) +
                          "' have the same advisory lock key");
      }
    }
  }
  // Lock names are validated ([a-z0-9_.-/]), so they are safe as literals; quoted all the same.
  std::string values, keys, quoted;
  for (std::string_view name : fresh) {
    const std::string key = std::to_string(postgres_key(name));
    const std::string literal = pg::quote_literal(name);
    values += (values.empty() ? "(" : ", (") + key + ", " + literal + ")";
    keys += (keys.empty() ? "" : ", ") + key;
    quoted += (quoted.empty() ? "" : ", ") + literal;
  }
  sql_ = comment_;
  sql_ += "INSERT INTO kagi_lock_names (key, name) VALUES " + values +
          " ON CONFLICT (key) DO NOTHING; SELECT key, name FROM kagi_lock_names WHERE key IN (" +
          keys + ") AND name NOT IN (" + quoted + ")";
  if (auto ec = run(deadline)) {
    if (ec != pg::Errc::kQuery) return ec;
    backend_.lose_names_table(last_error_);  // no table, no privilege: go on without it
    return {};
  }
  if (reply_.size() == 1 && reply_[0].rows() > 0) {
    const std::string key(reply_[0].get(0, 0));
    const std::string other(reply_[0].get(0, 1));
    for (std::string_view name : fresh) {
      if (std::to_string(postgres_key(name)) == key) {
        return failed(make_error_code(Errc::kNameCollision),
                      "'" + std::string(name) + "' has the advisory lock key of '" + other +
                          "' (registered in kagi_lock_names); rename one of them");
      }
    }
  }
  for (std::string_view name : fresh) backend_.registered().add(name);
  return {};
}

template <typename Attempt>
std::error_code PostgresSession::lock_statement(Clock::time_point deadline, Attempt attempt) {
  for (int tries = 0;; ++tries) {
    // Decided before the round trip: a failure drops the connection, and with it held_.
    const bool held_nothing = held_ == 0;
    if (auto ec = pin(deadline)) return ec;
    if (lost_.load(std::memory_order_relaxed)) {
      return failed(make_error_code(Errc::kUnavailable),
                    "postgres: this request's connection ended while it held locks, so they "
                    "are gone; it takes no more until it ends");
    }
    const std::error_code ec = attempt();
    // A pooled connection the server closed meanwhile (restart): once more, on a new one,
    // unless locks were held on it (they went with it: the request is fenced instead).
    if (ec == Errc::kUnavailable && tries == 0 && held_nothing && Clock::now() < deadline) {
      continue;
    }
    return ec == pg::Errc::kQuery ? refusal(reply_.sqlstate()) : ec;
  }
}

std::error_code PostgresSession::take(std::string_view name, Mode mode, bool wait,
                                      Clock::time_point deadline, uint64_t& epoch, void*& handle) {
  drain_pending();
  const int64_t key = postgres_key(name);
  bool ordered = false;  // decided once connected: the first connection may make the sequence
  const std::error_code ec = lock_statement(deadline, [&]() -> std::error_code {
    mu_.assert_held();  // run by lock_statement, under mu_
    ordered = mode == Mode::kExclusive && backend_.epoch_sequence();
    const std::string_view one[] = {name};
    if (auto ec = register_names(one, deadline)) return ec;
    if (!wait) {
      sql_ = comment_;
      append_call(sql_, lock_function(mode, false), key);
      if (ordered) sql_ += kNextEpoch;
      return run(deadline);
    }
    if (auto ec = begin_wait(deadline)) return ec;
    append_call(sql_, lock_function(mode, true), key);
    if (ordered) sql_ += kNextEpoch;
    backend_.count_active(1);
    const std::error_code ran = run(deadline + backend_.options().postgres_grace);
    backend_.count_active(-1);
    return ran;
  });
  if (ec) return ec;
  if (!wait && (reply_.size() != 1 || reply_[0].get(0, 0) != "t")) {
    return make_error_code(Errc::kTimeout);
  }
  ++held_;
  backend_.count_active(1);
  epoch = ordered ? epoch_from(reply_, 0, 1) : 0;
  if (epoch == 0) epoch = backend_.next_epoch();
  handle = handle_of(generation_);
  return {};
}

std::error_code PostgresSession::acquire(std::string_view name, Mode mode,
                                         Clock::time_point deadline, uint64_t& epoch, void*& handle,
                                         bool* contended) {
  util::MutexLock lock(mu_);
  if (contended) *contended = true;  // the context tried without waiting first
  return take(name, mode, true, deadline, epoch, handle);
}

std::error_code PostgresSession::try_acquire(std::string_view name, Mode mode,
                                             Clock::time_point deadline, uint64_t& epoch,
                                             void*& handle) {
  util::MutexLock lock(mu_);
  return take(name, mode, false, deadline, epoch, handle);
}

std::error_code PostgresSession::acquire_set(std::span<SetEntry> entries,
                                             Clock::time_point deadline) {
  util::MutexLock lock(mu_);
  drain_pending();
  std::vector<std::string_view> names;
  for (const SetEntry& e : entries) names.push_back(e.name);
  bool refused = false;  // the server ended the statement: some names may have been taken
  bool ordered = false;  // as in take()
  const std::error_code ec = lock_statement(deadline, [&]() -> std::error_code {
    mu_.assert_held();  // run by lock_statement, under mu_
    ordered = backend_.epoch_sequence();
    if (auto ec = register_names(names, deadline)) return ec;
    if (auto ec = begin_wait(deadline)) return ec;
    // One statement, one round trip: the rows are taken in the order listed (canonical),
    // each first tried without waiting so that the answer says which ones waited.
    // An exclusive row then draws its epoch, after its lock (a row's columns are evaluated
    // in order).
    sql_ +=
        "SELECT CASE WHEN t.s THEN (CASE WHEN pg_try_advisory_lock_shared(t.k) THEN false "
        "ELSE (SELECT true FROM (SELECT pg_advisory_lock_shared(t.k)) w) END) "
        "ELSE (CASE WHEN pg_try_advisory_lock(t.k) THEN false "
        "ELSE (SELECT true FROM (SELECT pg_advisory_lock(t.k)) w) END) END";
    sql_ += ordered ? ", CASE WHEN t.s THEN NULL ELSE nextval('kagi_lock_epochs') END" : "";
    sql_ += " FROM (VALUES ";
    for (size_t i = 0; i < entries.size(); ++i) {
      sql_ += i ? ", (" : "(";
      sql_ += std::to_string(postgres_key(entries[i].name));
      sql_ += i ? ", " : "::bigint, ";
      sql_ += entries[i].mode == Mode::kShared ? "true" : "false";
      sql_ += ')';
    }
    sql_ += ") AS t(k, s)";
    backend_.count_active(static_cast<ptrdiff_t>(entries.size()));
    const std::error_code ran = run(deadline + backend_.options().postgres_grace);
    backend_.count_active(-static_cast<ptrdiff_t>(entries.size()));
    refused = ran == pg::Errc::kQuery;
    return ran;
  });
  if (refused) {
    // Session locks outlive the rolled-back statement: give back the ones it took before it
    // stopped (unlocking one it did not take only answers false).
    sql_ = comment_;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) sql_ += "; ";
      append_call(sql_, unlock_function(entries[i].mode), postgres_key(entries[i].name));
    }
    (void)run(Clock::now() + backend_.options().timeout);  // a failure drops the connection
  }
  if (ec) return ec;
  if (reply_.size() != 1 || reply_[0].rows() != static_cast<int>(entries.size())) {
    drop_connection();  // an answer we do not understand: let the server release everything
    return failed(make_error_code(Errc::kBackend), "unexpected answer to a lock set");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].contended = reply_[0].get(static_cast<int>(i), 0) == "t";
    entries[i].epoch = ordered ? epoch_from(reply_, static_cast<int>(i), 1) : 0;
    if (entries[i].epoch == 0) entries[i].epoch = backend_.next_epoch();
    entries[i].handle = handle_of(generation_);
  }
  held_ += entries.size();
  backend_.count_active(static_cast<ptrdiff_t>(entries.size()));
  return {};
}

void PostgresSession::unlock(int64_t key, Mode mode, uint64_t generation) const noexcept {
  // Granted on a connection that broke since: the server released it when the session ended.
  if (generation != generation_ || !conn_ || conn_->broken()) return;
  try {
    sql_ = comment_;
    append_call(sql_, unlock_function(mode), key);
  } catch (...) {  // out of memory: let the server release it by ending the session
    drop_connection();
    return;
  }
  if (run(Clock::now() + backend_.options().timeout)) {
    drop_connection();  // whatever failed, ending the session releases the lock
    return;
  }
  --held_;
  backend_.count_active(-1);
}

void PostgresSession::drain_pending() const noexcept {
  std::vector<PendingRelease> pending;
  {
    util::MutexLock lock(pending_mu_);
    pending.swap(pending_);
  }
  for (const PendingRelease& p : pending) unlock(p.key, p.mode, p.generation);
}

void PostgresSession::release(std::string_view name, Mode mode, void* handle) noexcept {
  const int64_t key = postgres_key(name);
  // The watchdog may call this while the request's thread waits on the connection: then the
  // release is queued, and done by that thread as soon as its statement returns.
  if (!mu_.try_lock()) {
    {
      util::MutexLock lock(pending_mu_);
      try {
        pending_.push_back({key, mode, generation_of(handle)});
        return;
      } catch (...) {
      }
    }
    mu_.lock();  // out of memory: wait for the connection after all
  }
  unlock(key, mode, generation_of(handle));
  drain_pending();
  mu_.unlock();
}

std::error_code PostgresSession::verify(std::string_view, uint64_t, void* handle) const noexcept {
  util::MutexLock lock(mu_);
  if (!conn_ || conn_->broken() || generation_of(handle) != generation_) {
    return make_error_code(Errc::kFenceLost);
  }
  // A session lock lasts as long as its session: if the server still answers on this
  // connection, the lock is still ours.
  try {
    sql_ = comment_;
    sql_ += "SELECT 1";
  } catch (...) {
    return make_error_code(Errc::kFenceLost);
  }
  if (run(Clock::now() + backend_.options().timeout)) return make_error_code(Errc::kFenceLost);
  return {};
}

std::error_code PostgresSession::with_connection(void* handle, const ConnectionWork& work) {
  util::MutexLock lock(mu_);
  // No drain_pending() before the work: a release queued by the watchdog would let the lock go
  // before the statement it protects.
  if (!conn_ || conn_->broken() || generation_of(handle) != generation_) {
    return make_error_code(Errc::kFenceLost);
  }
  const std::error_code ec = work(*conn_);
  if (conn_->broken()) drop_connection();  // the server ends the session: its locks go too
  drain_pending();
  return ec;
}

void PostgresSession::end_request() noexcept {
  util::MutexLock lock(mu_);
  drain_pending();
  if (conn_) {
    if (held_ != 0) {
      drop_connection();  // something is still held: ending the session releases it
    } else {
      backend_.pool().give_back(std::move(conn_));  // a broken one is closed there
    }
  }
  lost_.store(false, std::memory_order_release);  // the next request starts afresh
}

std::string PostgresSession::last_error() const {
  util::MutexLock lock(mu_);
  return last_error_;
}

}  // namespace

std::unique_ptr<Backend> make_postgres_backend(const LockOptions& options) {
  return std::make_unique<PostgresBackend>(options);
}

}  // namespace kagi::lock
