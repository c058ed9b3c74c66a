// pg/connection.hpp — one libpq connection whose every wait has a deadline.
//
//   std::error_code ec;
//   std::string why;
//   auto conn = pg::Connection::open(options, pg::Clock::now() + 2s, ec, &why);
//   pg::Reply reply;
//   if (!conn->exec("SELECT pg_try_advisory_lock(42)", deadline, reply, &why))
//     bool got = reply[0].get(0, 0) == "t";
//
// libpq's blocking calls wait as long as the network lets them; kagi never waits past a
// deadline, so connecting and every statement run on a non-blocking socket polled with the
// time left. A statement that has no answer at its deadline leaves the connection in an
// unknown state: it is closed (the server ends its session, and its session locks, when it
// notices), and the call returns Errc::kTimeout. Any broken connection stays broken: open a
// new one.
//
// exec() sends the simple-protocol Query message, so one call may carry several statements
// separated by ';' (one round trip). They run as one implicit transaction: an error in any of
// them rolls back all of them (session advisory locks are the exception: see
// docs/LOCKING.md). Values must be embedded as literals by the caller; build them only from
// validated text or with quote_literal().
//
// Not thread-safe: one thread uses a connection at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/pg/errors.hpp>
#include <kagi/pg/options.hpp>

struct pg_conn;
struct pg_result;

namespace kagi::pg {

using Clock = std::chrono::steady_clock;

// The rows one statement returned (a view into its Reply).
class Rows {
 public:
  explicit Rows(const pg_result* result) : result_(result) {}
  int rows() const;
  int columns() const;
  // The text of a field; empty for NULL (is_null tells them apart).
  std::string_view get(int row, int column) const;
  // The field as a number; 0 for NULL or text that is not one.
  int64_t get_int(int row, int column) const;
  bool is_null(int row, int column) const;

 private:
  const pg_result* result_;
};

// What one exec() returned: the rows of each statement that returned rows, in order, and the
// first error the server reported.
class Reply {
 public:
  Reply() = default;
  ~Reply() { clear(); }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;

  size_t size() const { return results_.size(); }
  Rows operator[](size_t i) const { return Rows(results_[i]); }
  // SQLSTATE of the first error ("55P03": lock_timeout), empty if none.
  const std::string& sqlstate() const { return sqlstate_; }
  void clear();

 private:
  friend class Connection;
  std::vector<pg_result*> results_;
  std::string sqlstate_;
};

class Connection {
 public:
  // Connects (TLS and authentication included) before `deadline`. Null on failure, with
  // Errc::kUnavailable / kTimeout / kBadOptions in `ec` and libpq's reason in `why`.
  static std::unique_ptr<Connection> open(const ConnectOptions& options, Clock::time_point deadline,
                                          std::error_code& ec, std::string* why);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` and waits for all its results until `deadline`. Empty on success. Errc::kQuery
  // if the server refused a statement (reply.sqlstate() says which error; the connection is
  // still good), kTimeout or kUnavailable if the connection is now broken.
  std::error_code exec(std::string_view sql, Clock::time_point deadline, Reply& reply,
                       std::string* why);

  bool broken() const { return broken_; }
  // The server process serving this connection (pg_stat_activity.pid, pg_locks.pid).
  int server_pid() const { return server_pid_; }
  // True if the server closed this idle connection meanwhile (restart, pg_terminate_backend,
  // idle_session_timeout): looked at without waiting. A connection found closed is broken.
  bool closed_while_idle();

  // For a connection that LISTENs (store's change feed): the socket to poll for readability,
  // and the payloads of the notifications that arrived, added to `payloads` without waiting.
  // False once the connection is broken.
  int socket() const;
  bool take_notifications(std::vector<std::string>& payloads);

  // When the pool last took it back (pg/pool.hpp).
  Clock::time_point idle_since;

 private:
  explicit Connection(pg_conn* conn);
  // Polls the socket for `events` until `deadline`: true when ready.
  bool wait_socket(short events, Clock::time_point deadline);
  std::error_code fail(Errc errc, std::string* why, std::string_view doing);

  pg_conn* conn_;
  int server_pid_ = 0;
  bool broken_ = false;
  std::string sql_;  // NUL-terminated copy of the statement (libpq wants a C string)
};

// Statements messages this process has sent (exec() calls), for tests and the metrics: a
// lock set taken "in one round trip" is one more here.
uint64_t round_trips();

// 'text' with single quotes doubled, in single quotes: a string literal for standard
// (standard_conforming_strings = on) SQL.
std::string quote_literal(std::string_view text);

// Appends `decode('<hex>', 'hex')`: any bytes as a bytea value, whatever the server's string
// settings. Read them back with `encode(column, 'hex')` and decode_hex().
void append_bytea(std::string& sql, std::string_view bytes);
// The bytes of lowercase or uppercase hex digits; false if `hex` is not that.
bool decode_hex(std::string_view hex, std::string& out);

}  // namespace kagi::pg
