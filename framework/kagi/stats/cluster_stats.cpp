#include <kagi/stats/cluster_stats.hpp>

#include <deque>
#include <utility>

#include <kagi/pg/connection.hpp>
#include <kagi/pg/errors.hpp>
#include <kagi/util/log.hpp>

namespace kagi::stats {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kUndefinedTable = "42P01";

// Made by the first publisher (serialised between processes like the lock backend's table).
constexpr std::string_view kCreateTable =
    "SELECT pg_advisory_xact_lock(1801545577, 3); "
    "CREATE UNLOGGED TABLE IF NOT EXISTS kagi_host_stats (host text PRIMARY KEY, "
    "updated_at timestamptz NOT NULL, processes integer NOT NULL, stats bytea NOT NULL)";

}  // namespace

std::vector<HostStatsRow> read_cluster_stats(const pg::ConnectOptions& options,
                                             std::chrono::milliseconds timeout,
                                             std::string* error) {
  std::vector<HostStatsRow> rows;
  const auto deadline = Clock::now() + timeout;
  std::error_code ec;
  std::string why;
  auto conn = pg::Connection::open(options, deadline, ec, &why);
  if (!conn) {
    if (error) *error = why;
    return rows;
  }
  pg::Reply reply;
  ec = conn->exec(
      "SELECT host, processes, encode(stats, 'hex'), (extract(epoch FROM now() - updated_at) * "
      "1000)::bigint "
      "FROM kagi_host_stats WHERE updated_at > now() - interval '" +
          std::to_string(kFresh.count()) + " seconds' ORDER BY host",
      deadline, reply, &why);
  if (ec) {
    if (!(ec == pg::Errc::kQuery && reply.sqlstate() == kUndefinedTable) && error) *error = why;
    return rows;
  }
  if (reply.size() != 1) return rows;
  for (int i = 0; i < reply[0].rows(); ++i) {
    HostStatsRow row;
    row.host = reply[0].get(i, 0);
    row.stats.processes = static_cast<size_t>(reply[0].get_int(i, 1));
    row.age_ms = reply[0].get_int(i, 3);
    std::string text;
    if (!pg::decode_hex(reply[0].get(i, 2), text) ||
        !decode_stats_file(text, row.stats.stats, row.stats.requests, row.stats.events,
                           &row.stats.storage)) {
      continue;  // written by another kagi version: shown once it publishes ours
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

ClusterStatsPublisher::ClusterStatsPublisher(std::string locks_dir, std::string host,
                                             pg::ConnectOptions connect, Options options)
    : locks_dir_(std::move(locks_dir)),
      host_(std::move(host)),
      connect_(std::move(connect)),
      options_(options),
      thread_([this] { run(); }) {}

ClusterStatsPublisher::~ClusterStatsPublisher() {
  {
    util::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool ClusterStatsPublisher::publish_now() {
  util::MutexLock lock(publish_mu_);
  const HostStats host = read_host_stats(locks_dir_);
  const std::deque<Event> events(host.events.begin(), host.events.end());
  std::string text = encode_stats_file(host.stats, host.requests, events, host.storage);
  const auto now = Clock::now();
  if (text == last_text_ && now - last_write_ < kHeartbeat && conn_ && !conn_->broken()) {
    return true;
  }
  const auto deadline = now + options_.timeout;
  std::error_code ec;
  std::string why;
  if (!conn_ || conn_->broken()) {
    if (now < retry_at_) return false;  // a down server costs one attempt per second
    conn_ = pg::Connection::open(connect_, deadline, ec, &why);
    pg::Reply reply;
    if (conn_) ec = conn_->exec(kCreateTable, deadline, reply, &why);
    if (!conn_ || ec) {
      conn_.reset();
      retry_at_ = now + std::chrono::seconds(1);
      return false;
    }
  }
  pg::Reply reply;
  // bytea: event details hold request paths, which need not be valid UTF-8.
  std::string sql = "INSERT INTO kagi_host_stats (host, updated_at, processes, stats) VALUES (" +
                    pg::quote_literal(host_) + ", now(), " + std::to_string(host.processes) + ", ";
  pg::append_bytea(sql, text);
  sql +=
      ") ON CONFLICT (host) DO UPDATE SET updated_at = EXCLUDED.updated_at, processes = "
      "EXCLUDED.processes, stats = EXCLUDED.stats";
  ec = conn_->exec(sql, deadline, reply, &why);
  if (ec) {
    if (ec == pg::Errc::kQuery) conn_.reset();  // e.g. the table vanished: make it again
    return false;
  }
  last_text_ = std::move(text);
  last_write_ = now;
  return true;
}

void ClusterStatsPublisher::run() {
  for (;;) {
    {
      util::MutexLock lock(mu_);
      const auto next = Clock::now() + options_.interval;
      while (!stop_ && cv_.wait_until(mu_, next) != std::cv_status::timeout) {
      }
      if (stop_) return;
    }
    publish_now();
  }
}

}  // namespace kagi::stats
