#include <kagi/pg/connection.hpp>

#include <charconv>

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <ctime>

#include <kagi/pg/errors.hpp>
#include <kagi/util/wait_fd.hpp>

namespace kagi::pg {
namespace {

// The keyword/value pairs a connection is opened with: the user's connection string, plus
// kagi's defaults for what it leaves unset (pg/options.hpp).
struct ConnectParams {
  DsnSettings settings;

  int find(std::string_view key) const {
    for (size_t i = 0; i < settings.size(); ++i) {
      if (settings[i].first == key) return static_cast<int>(i);
    }
    return -1;
  }
  void add_default(const std::string& key, const std::string& value) {
    if (find(key) < 0) settings.emplace_back(key, value);
  }
};

std::error_code build_params(const ConnectOptions& options, ConnectParams& params,
                             std::string* why) {
  if (auto ec = parse_dsn(options.dsn, params.settings, why)) {
    if (why) *why = "bad connection string: " + *why;
    return ec;
  }
  const std::string name =
      options.application_name.empty() ? default_application_name() : options.application_name;
  if (const int at = params.find("application_name"); at >= 0 && options.force_application_name) {
    params.settings[at].second = name;
  } else {
    params.add_default("application_name", name);
  }
  params.add_default("keepalives", "1");
  params.add_default("keepalives_idle", std::to_string(options.keepalives_idle_s));
  params.add_default("keepalives_interval", std::to_string(options.keepalives_interval_s));
  params.add_default("keepalives_count", std::to_string(options.keepalives_count));
  params.add_default("tcp_user_timeout", std::to_string(options.tcp_user_timeout_ms));
  // The server's side of the socket: these are settings any user may change for their own
  // session, and they are what frees a vanished client host's locks.
  const std::string server_side =
      "-c tcp_keepalives_idle=" + std::to_string(options.keepalives_idle_s) +
      " -c tcp_keepalives_interval=" + std::to_string(options.keepalives_interval_s) +
      " -c tcp_keepalives_count=" + std::to_string(options.keepalives_count) +
      " -c tcp_user_timeout=" + std::to_string(options.tcp_user_timeout_ms);
  const int at = params.find("options");
  if (at < 0) {
    params.settings.emplace_back("options", server_side);
  } else if (std::string& user = params.settings[at].second;
             user.find("tcp_keepalives") == std::string::npos &&
             user.find("tcp_user_timeout") == std::string::npos) {
    user += " " + server_side;
  }
  return {};
}

std::string trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  // libpq's multi-line messages (one line per address tried) read better on one line.
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

void ignore_notice(void*, const PGresult*) {}

std::atomic<uint64_t> g_round_trips{0};

}  // namespace

int Rows::rows() const { return PQntuples(result_); }
int Rows::columns() const { return PQnfields(result_); }
std::string_view Rows::get(int row, int column) const {
  return {PQgetvalue(result_, row, column), static_cast<size_t>(PQgetlength(result_, row, column))};
}
int64_t Rows::get_int(int row, int column) const {
  const std::string_view text = get(row, column);
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}
bool Rows::is_null(int row, int column) const { return PQgetisnull(result_, row, column) != 0; }

void Reply::clear() {
  for (PGresult* r : results_) PQclear(r);
  results_.clear();
  sqlstate_.clear();
}

Connection::Connection(PGconn* conn) : conn_(conn) {}

Connection::~Connection() { PQfinish(conn_); }

std::unique_ptr<Connection> Connection::open(const ConnectOptions& options,
                                             Clock::time_point deadline, std::error_code& ec,
                                             std::string* why) {
  ConnectParams params;
  if ((ec = build_params(options, params, why))) return nullptr;
  std::vector<const char*> keys, values;
  for (const auto& [key, value] : params.settings) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* raw = PQconnectStartParams(keys.data(), values.data(), 0);
  if (!raw) {
    ec = make_error_code(Errc::kUnavailable);
    if (why) *why = "out of memory starting a PostgreSQL connection";
    return nullptr;
  }
  std::unique_ptr<Connection> conn(new Connection(raw));
  if (PQstatus(raw) == CONNECTION_BAD) {
    ec = conn->fail(Errc::kUnavailable, why, "connecting");
    return nullptr;
  }
  PQsetNoticeReceiver(raw, ignore_notice, nullptr);
  for (;;) {
    const PostgresPollingStatusType state = PQconnectPoll(raw);
    if (state == PGRES_POLLING_OK) break;
    if (state == PGRES_POLLING_FAILED) {
      ec = conn->fail(Errc::kUnavailable, why, "connecting");
      return nullptr;
    }
    const short events = state == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    if (!conn->wait_socket(events, deadline)) {
      ec = conn->fail(Errc::kTimeout, why, "connecting");
      return nullptr;
    }
  }
  if (PQsetnonblocking(raw, 1) != 0) {
    ec = conn->fail(Errc::kUnavailable, why, "switching to non-blocking mode");
    return nullptr;
  }
  conn->server_pid_ = PQbackendPID(raw);
  ec.clear();
  return conn;
}

std::error_code Connection::fail(Errc errc, std::string* why, std::string_view doing) {
  broken_ = true;
  if (why) {
    std::string message = trimmed(PQerrorMessage(conn_));
    if (errc == Errc::kTimeout) message = "no answer before the deadline";
    *why = "PostgreSQL " + std::string(doing) + ": " +
           (message.empty() ? std::string("connection lost") : message);
  }
  return make_error_code(errc);
}

bool Connection::wait_socket(short events, Clock::time_point deadline) {
  const int fd = PQsocket(conn_);
  return fd >= 0 && util::wait_fd(fd, events, deadline);
}

std::error_code Connection::exec(std::string_view sql, Clock::time_point deadline, Reply& reply,
                                 std::string* why) {
  reply.clear();
  if (broken_) {
    if (why) *why = "PostgreSQL: the connection is broken";
    return make_error_code(Errc::kUnavailable);
  }
  sql_.assign(sql);
  g_round_trips.fetch_add(1, std::memory_order_relaxed);
  if (PQsendQuery(conn_, sql_.c_str()) == 0) return fail(Errc::kUnavailable, why, "sending");
  // Send what the socket takes; what it does not waits for POLLOUT (a full socket buffer).
  for (;;) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) break;
    if (flushed < 0) return fail(Errc::kUnavailable, why, "sending");
    if (!wait_socket(POLLOUT | POLLIN, deadline)) return fail(Errc::kTimeout, why, "sending");
    if (PQconsumeInput(conn_) == 0) return fail(Errc::kUnavailable, why, "sending");
  }
  for (;;) {
    while (PQisBusy(conn_)) {
      if (!wait_socket(POLLIN, deadline)) return fail(Errc::kTimeout, why, "waiting for an answer");
      if (PQconsumeInput(conn_) == 0) return fail(Errc::kUnavailable, why, "reading an answer");
    }
    PGresult* result = PQgetResult(conn_);
    if (!result) break;
    switch (PQresultStatus(result)) {
      case PGRES_TUPLES_OK:
        reply.results_.push_back(result);
        break;
      case PGRES_COMMAND_OK:
      case PGRES_EMPTY_QUERY:
        PQclear(result);
        break;
      default: {
        if (reply.sqlstate_.empty()) {
          const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
          reply.sqlstate_ = state && *state ? state : "XX000";
          if (why) *why = "PostgreSQL: " + trimmed(PQresultErrorMessage(result));
        }
        PQclear(result);
      }
    }
  }
  if (PQstatus(conn_) == CONNECTION_BAD) return fail(Errc::kUnavailable, why, "reading an answer");
  if (!reply.sqlstate_.empty()) return make_error_code(Errc::kQuery);
  return {};
}

bool Connection::closed_while_idle() {
  if (broken_) return true;
  const int fd = PQsocket(conn_);
  if (fd < 0) return broken_ = true;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) == 0) return false;  // nothing arrived: still open as far as we can tell
  // An idle connection only receives a termination notice (an error libpq keeps for later,
  // with no result) or an end of file: either way the server is done with it (a
  // parameter-status message alone would also end up here, which only costs a reconnect).
  (void)PQconsumeInput(conn_);
  while (PGresult* r = PQgetResult(conn_)) PQclear(r);
  return broken_ = true;
}

int Connection::socket() const { return broken_ ? -1 : PQsocket(conn_); }

bool Connection::take_notifications(std::vector<std::string>& payloads) {
  if (broken_) return false;
  if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD) {
    broken_ = true;
    return false;
  }
  while (PGnotify* n = PQnotifies(conn_)) {
    payloads.emplace_back(n->extra ? n->extra : "");
    PQfreemem(n);
  }
  return true;
}

uint64_t round_trips() { return g_round_trips.load(std::memory_order_relaxed); }

std::string quote_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  return out;
}

void append_bytea(std::string& sql, std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  sql.reserve(sql.size() + 2 * bytes.size() + 20);
  sql += "decode('";
  for (unsigned char c : bytes) {
    sql += kHex[c >> 4];
    sql += kHex[c & 15];
  }
  sql += "', 'hex')";
}

bool decode_hex(std::string_view hex, std::string& out) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  out.clear();
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi << 4 | lo);
  }
  return true;
}

}  // namespace kagi::pg
