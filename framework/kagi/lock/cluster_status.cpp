#include <kagi/lock/cluster_status.hpp>

#include <sys/stat.h>

#include <set>

#include <kagi/lock/detail/dir_lock.hpp>
#include <kagi/lock/detail/holder_text.hpp>
#include <kagi/lock/detail/lockd_client.hpp>
#include <kagi/lock/detail/lockd_status.hpp>
#include <kagi/pg/connection.hpp>

namespace kagi::lock {
namespace {

constexpr std::string_view kUndefinedTable = "42P01";
constexpr std::string_view kInsufficientPrivilege = "42501";

// Holders and waiters of advisory locks taken through a bigint key (objsubid 1) in this
// database, oldest first.
std::string locks_query(bool with_names) {
  std::string q =
      "SELECT a.application_name, COALESCE(host(a.client_addr), ''), l.granted, l.mode, "
      "(l.classid::bigint << 32) | l.objid::bigint, ";
  q += with_names ? "n.name, " : "NULL, ";
  q += "a.query, (extract(epoch FROM COALESCE(l.waitstart, a.query_start)) * 1000)::bigint "
       "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid ";
  if (with_names) {
    q += "LEFT JOIN kagi_lock_names n ON n.key = ((l.classid::bigint << 32) | l.objid::bigint) ";
  }
  q += "WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = "
       "(SELECT oid FROM pg_database WHERE datname = current_database()) "
       "ORDER BY 8; "
       "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'kagi/%'";
  return q;
}

// "/*kagi <request id> <method> <path> */ ..." → the three fields; false if not such a comment.
bool parse_comment(std::string_view query, RegistryEntry& e) {
  constexpr std::string_view kStart = "/*kagi ";
  if (query.substr(0, kStart.size()) != kStart) return false;
  query.remove_prefix(kStart.size());
  const size_t end = query.find(" */");
  if (end == std::string_view::npos) return false;
  query = query.substr(0, end);
  const size_t a = query.find(' ');
  const size_t b = a == std::string_view::npos ? a : query.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  e.request_id = detail::decode_holder_text(query.substr(0, a));
  e.method = detail::decode_holder_text(query.substr(a + 1, b - a - 1));
  e.path = detail::decode_holder_text(query.substr(b + 1));
  return true;
}

// The dir backend's holders, from the owner records every host writes under locks.dir.
void read_dir_status(const LockOptions& options, ClusterStatus& status) {
  using std::chrono::milliseconds;
  using std::chrono::system_clock;
  std::set<std::string> hosts;
  for (dirlock::Listed& l : dirlock::list_all(options.dir + "/dirlocks")) {
    RegistryEntry e;
    e.mode = l.entry.mode;
    e.record = l.dir + "/" + l.entry.file;
    e.lease_expiry = system_clock::time_point(milliseconds(l.entry.expiry_ms));
    e.token = l.entry.token;
    if (l.owner_read) {
      e.host = l.owner.host;
      e.name = l.owner.name;
      e.pid = l.owner.pid;
      e.request_id = l.owner.request;
      const size_t sp = l.owner.route.find(' ');
      e.method = l.owner.route.substr(0, sp);
      e.path = sp == std::string::npos ? "" : l.owner.route.substr(sp + 1);
      e.since = system_clock::time_point(milliseconds(l.owner.at_ms));
      e.lease = milliseconds(l.owner.lease_ms);
      hosts.insert(l.owner.host);
    } else {
      e.name = "#" + l.dir;  // released while we read it, or unreadable
    }
    // An exclusive record of an older kagi not renewed yet has no token in its name: then it
    // is the size of the name's counter file (this version writes it into the name at once).
    if (e.token == 0 && e.mode == Mode::kExclusive) {
      struct stat st {};
      std::string counter = options.dir + "/dirlocks/" + l.dir;
      counter.back() = 'n';
      if (::stat(counter.c_str(), &st) == 0) e.token = static_cast<uint64_t>(st.st_size);
    }
    status.entries.push_back(std::move(e));
  }
  status.hosts = hosts.size();
}

// kagi-lockd's STATUS (docs/LOCKD.md): every holder and waiter the server has, with the
// client address of each; a kagi holder's label gives its host, pid and request.
ClusterStatus read_lockd_status(const LockOptions& options, std::chrono::milliseconds timeout) {
  ClusterStatus status;
  status.backend = "lockd";
  status.spans_hosts = true;
  const auto deadline = Clock::now() + timeout;
  std::unique_ptr<detail::LockdConnection> conn;
  try {
    std::error_code ec;
    conn = detail::LockdConnection::open(detail::make_lockd_target(options.lockd), deadline, ec,
                                         &status.error);
  } catch (const std::invalid_argument& e) {
    status.error = e.what();
  }
  if (!conn) return status;
  std::string line;
  // Labelled, so that this reader is not taken for a lock holder by a later STATUS.
  std::error_code ec = conn->send("CLIENT kagi-admin\nSTATUS\n", deadline, &status.error);
  if (!ec) ec = conn->read_line(line, deadline, &status.error);
  if (!ec && line != "ok") {
    status.error = "kagi-lockd " + options.lockd.address + " answered CLIENT with '" + line + "'";
    return status;
  }
  const auto now = std::chrono::system_clock::now();
  while (!ec) {
    ec = conn->read_line(line, deadline, &status.error);
    if (ec || line == "end") break;
    if (!detail::parse_lockd_status_line(line, now, status.entries)) {
      status.error = "kagi-lockd " + options.lockd.address + ": a STATUS line that does not parse";
      status.entries.clear();
      return status;
    }
  }
  if (ec) {
    status.entries.clear();
    return status;
  }
  status.error.clear();
  std::set<std::string> hosts, clients;
  for (const RegistryEntry& e : status.entries) {
    hosts.insert(e.host);
    clients.insert(e.client_address);
  }
  status.hosts = hosts.size();
  status.connections = clients.size();
  return status;
}

}  // namespace

std::error_code break_stale_lock(const LockOptions& options, std::string_view record) {
  const size_t slash = record.find('/');
  if (options.backend != "dir" || slash == std::string_view::npos) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  return dirlock::break_record(options.dir + "/dirlocks", record.substr(0, slash),
                               record.substr(slash + 1), options.dir_max_clock_skew);
}

ClusterStatus read_cluster_status(const LockOptions& options, std::chrono::milliseconds timeout) {
  if (options.backend == "lockd") return read_lockd_status(options, timeout);
  ClusterStatus status;
  status.backend = options.backend;
  if (options.backend == "dir") {
    status.spans_hosts = true;
    status.break_margin = options.dir_max_clock_skew;
    read_dir_status(options, status);
    return status;
  }
  if (options.backend != "postgres") return status;
  status.spans_hosts = true;
  const auto deadline = pg::Clock::now() + timeout;
  pg::ConnectOptions connect = options.postgres;
  connect.application_name = "kagi-admin";  // not a lock holder: not counted as a host
  connect.force_application_name = true;
  std::error_code ec;
  auto conn = pg::Connection::open(connect, deadline, ec, &status.error);
  if (!conn) return status;
  pg::Reply reply;
  ec = conn->exec(locks_query(true), deadline, reply, &status.error);
  // No names table yet, or one this role may not read: the locks all the same, without names.
  if (ec == pg::Errc::kQuery &&
      (reply.sqlstate() == kUndefinedTable || reply.sqlstate() == kInsufficientPrivilege)) {
    ec = conn->exec(locks_query(false), deadline, reply, &status.error);
  }
  if (ec || reply.size() != 2) {
    if (!ec) status.error = "unexpected answer from PostgreSQL";
    return status;
  }
  status.error.clear();
  const pg::Rows rows = reply[0];
  for (int r = 0; r < rows.rows(); ++r) {
    RegistryEntry e;
    const std::string app(rows.get(r, 0));
    if (!pg::parse_application_name(app, e.host, e.pid)) e.host = std::string(rows.get(r, 1));
    e.waiting = rows.get(r, 2) != "t";
    e.mode = rows.get(r, 3) == "ShareLock" ? Mode::kShared : Mode::kExclusive;
    e.name = rows.is_null(r, 5) ? "#" + std::string(rows.get(r, 4)) : std::string(rows.get(r, 5));
    if (!parse_comment(rows.get(r, 6), e)) {
      // Another role's statements are hidden unless this one may read all statistics.
      e.request_id = rows.get(r, 6) == "<insufficient privilege>"
                         ? "(hidden: grant pg_read_all_stats to see it)"
                         : "(not kagi)";
    }
    if (!rows.is_null(r, 7)) {
      e.since =
          std::chrono::system_clock::time_point(std::chrono::milliseconds(rows.get_int(r, 7)));
    }
    status.entries.push_back(std::move(e));
  }
  std::set<std::string> hosts;
  for (int r = 0; r < reply[1].rows(); ++r) {
    std::string host;
    int pid = 0;
    if (pg::parse_application_name(std::string(reply[1].get(r, 0)), host, pid)) {
      hosts.insert(host);
      ++status.connections;
    }
  }
  status.hosts = hosts.size();
  return status;
}

}  // namespace kagi::lock
