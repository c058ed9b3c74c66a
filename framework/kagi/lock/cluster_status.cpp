#include <kagi/lock/cluster_status.hpp>

#include <sys/stat.h>

#include <set>

#include <kagi/lock/detail/dir_lock.hpp>
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

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Undoes the %XX of the statement comment (postgres_backend.cpp, append_commented).
std::string decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
        hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
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
  e.request_id = decoded(query.substr(0, a));
  e.method = decoded(query.substr(a + 1, b - a - 1));
  e.path = decoded(query.substr(b + 1));
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
    // The token of a grant not renewed yet is the size of the name's counter file.
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

}  // namespace

std::error_code break_stale_lock(const LockOptions& options, std::string_view record) {
  const size_t slash = record.find('/');
  if (options.backend != "dir" || slash == std::string_view::npos) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  return dirlock::break_record(options.dir + "/dirlocks", record.substr(0, slash),
                               record.substr(slash + 1));
}

ClusterStatus read_cluster_status(const LockOptions& options, std::chrono::milliseconds timeout) {
  ClusterStatus status;
  status.backend = options.backend;
  if (options.backend == "dir") {
    status.spans_hosts = true;
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
