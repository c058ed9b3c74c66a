#include "admin/status.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>

#include <kagi/lock/cluster_status.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/util/json.hpp>
#include <kagi/view/views.hpp>

namespace kagi::apps::admin {
namespace {

using std::chrono::milliseconds;

int64_t ms_between(std::chrono::system_clock::time_point from,
                   std::chrono::system_clock::time_point to) {
  return std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(to - from).count());
}

int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

// RFC 3339 UTC with milliseconds: "2026-11-23T02:35:04.123Z".
std::string iso_time(int64_t ms) {
  const time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

std::string seconds_text(double s) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", s);
  return buf;
}

// Prometheus label value escaping: backslash, double quote and line feed.
std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The mode and the request of a holder or waiter: what local and cluster entries share.
void write_request_fields(util::JsonWriter& w, const lock::RegistryEntry& e) {
  w.key("mode")
      .value(lock::to_string(e.mode))
      .key("request_id")
      .value(e.request_id)
      .key("method")
      .value(e.method)
      .key("path")
      .value(e.path);
}

// A holder or waiter from this host's registry.
void write_entry(util::JsonWriter& w, const lock::RegistryEntry& e,
                 std::chrono::system_clock::time_point now) {
  const int64_t for_ms = ms_between(e.since, now);
  w.begin_object();
  write_request_fields(w, e);
  w.key("client_address")
      .value(e.client_address)
      .key("pid")
      .value(e.pid)
      .key("thread")
      .value(static_cast<int64_t>(e.thread))
      .key("since")
      .value(iso_time(unix_ms(e.since)))
      .key("for_ms")
      .value(for_ms)
      .key("slot")
      .value(e.slot)
      .key("seq")
      .value(e.seq);
  if (!e.waiting) w.key("long").value(for_ms >= kLongHold.count());
  w.end_object();
}

// How long an entry read from the lock server has held or waited, if the server said when it
// began: it hides a holder's statement times from a role that may not see that session's
// activity (docs/ADMIN.md), and then `since` is left at the epoch.
std::optional<int64_t> cluster_for_ms(const lock::RegistryEntry& e,
                                      std::chrono::system_clock::time_point now) {
  if (e.since == std::chrono::system_clock::time_point{}) return std::nullopt;
  return ms_between(e.since, now);
}

// The lease of a dir backend's record: when it was last renewed (age), how long it has left
// (negative: expired by the clock of the host that reads it) and its fencing token.
int64_t lease_left_ms(const lock::RegistryEntry& e, std::chrono::system_clock::time_point now) {
  return std::chrono::duration_cast<milliseconds>(e.lease_expiry - now).count();
}

int64_t lease_age_ms(const lock::RegistryEntry& e, std::chrono::system_clock::time_point now) {
  return ms_between(e.lease_expiry - e.lease, now);
}

void write_lease(util::JsonWriter& w, const lock::RegistryEntry& e,
                 std::chrono::system_clock::time_point now) {
  const int64_t left = lease_left_ms(e, now);
  w.key("record")
      .value(e.record)
      .key("lease_expires")
      .value(iso_time(unix_ms(e.lease_expiry)))
      .key("lease_left_ms")
      .value(left)
      .key("lease_age_ms")
      .value(lease_age_ms(e, now))
      .key("expired")
      .value(left < 0)
      .key("token")
      .value(e.token);
}

// An entry read from the lock server: no thread, slot or seq there; the client address only
// from kagi-lockd (empty for postgres).
void write_cluster_entry(util::JsonWriter& w, const lock::RegistryEntry& e,
                         std::chrono::system_clock::time_point now) {
  const std::optional<int64_t> for_ms = cluster_for_ms(e, now);
  w.begin_object().key("host").value(e.host).key("pid").value(e.pid);
  write_request_fields(w, e);
  if (for_ms) {
    w.key("since").value(iso_time(unix_ms(e.since))).key("for_ms").value(*for_ms);
  } else {
    w.key("since").null().key("for_ms").null();
  }
  if (!e.waiting) w.key("long").value(for_ms.value_or(0) >= kLongHold.count());
  if (!e.record.empty()) write_lease(w, e, now);
  // kagi-lockd knows each holder's address; PostgreSQL's entries keep their fields as they were.
  if (!e.client_address.empty()) w.key("client_address").value(e.client_address);
  w.end_object();
}

// Lock rows as a JSON array: name, holders, waiters, each entry written by `entry`.
using EntryWriter = void (*)(util::JsonWriter&, const lock::RegistryEntry&,
                             std::chrono::system_clock::time_point);
void write_rows(util::JsonWriter& w, const std::vector<LockRow>& rows,
                std::chrono::system_clock::time_point now, EntryWriter entry) {
  w.begin_array();
  for (const LockRow& row : rows) {
    w.begin_object().key("name").value(row.name).key("holders").begin_array();
    for (const auto& e : row.holders) entry(w, e, now);
    w.end_array().key("waiters").begin_array();
    for (const auto& e : row.waiters) entry(w, e, now);
    w.end_array().end_object();
  }
  w.end_array();
}

void write_histogram(util::JsonWriter& w, const util::HistogramSnapshot& h) {
  w.begin_object()
      .key("count")
      .value(h.count)
      .key("sum_us")
      .value(h.sum_us)
      .key("p50_us")
      .value(h.quantile_bound_us(0.5))
      .key("p90_us")
      .value(h.quantile_bound_us(0.9))
      .key("p99_us")
      .value(h.quantile_bound_us(0.99))
      .key("buckets")
      .begin_array();
  for (uint64_t b : h.buckets) w.value(b);
  w.end_array().end_object();
}

// A store counter (store/store_stats.hpp) as a Prometheus counter with its help: named
// kagi_store_<key>_total, and a time ("_us") in seconds, as Prometheus wants them.
void store_metric(std::string& out, const store::StoreField& f, uint64_t n) {
  const bool time = f.key.ends_with("_us");
  const std::string metric = "kagi_store_" +
                             std::string(time ? f.key.substr(0, f.key.size() - 3) : f.key) +
                             (time ? "_seconds_total" : "_total");
  out += "# HELP " + metric + " " + std::string(f.help) + "\n# TYPE " + metric + " counter\n" +
         metric + " " + (time ? seconds_text(static_cast<double>(n) / 1e6) : std::to_string(n)) +
         "\n";
}

// The "stats" object of /admin/locks.json (docs/ADMIN.md): one host's sums.
void write_stats(util::JsonWriter& w, const stats::HostStats& host) {
  w.begin_object()
      .key("processes")
      .value(static_cast<uint64_t>(host.processes))
      .key("prefixes")
      .begin_array();
  for (const auto& [prefix, p] : host.stats.prefixes) {
    w.begin_object()
        .key("prefix")
        .value(prefix)
        .key("acquisitions")
        .value(p.acquisitions)
        .key("contended")
        .value(p.contended)
        .key("timeouts")
        .value(p.timeouts)
        .key("order_violations")
        .value(p.order_violations)
        .key("leaks")
        .value(p.leaks)
        .key("revocations")
        .value(p.revocations)
        .key("wait");
    write_histogram(w, p.wait);
    w.key("hold");
    write_histogram(w, p.hold);
    w.end_object();
  }
  w.end_array().key("requests").begin_array();
  for (const auto& [route, r] : host.requests.routes) {
    w.begin_object().key("route").value(route).key("total").value(r.total()).key("statuses");
    w.begin_object();
    for (const auto& [status, n] : r.by_status) w.key(std::to_string(status)).value(n);
    w.end_object().key("duration");
    write_histogram(w, r.duration);
    w.end_object();
  }
  w.end_array().key("storage").begin_object();
  for (const store::StoreField& f : store::kStoreFields) {
    w.key(f.key).value(host.storage.*f.member);
  }
  w.end_object().end_object();
}

// The events array of /admin/locks.json: newest first.
void write_events(util::JsonWriter& w, const std::vector<stats::Event>& events) {
  w.begin_array();
  for (const stats::Event& e : events) {
    w.begin_object()
        .key("time")
        .value(iso_time(e.unix_ms))
        .key("kind")
        .value(e.kind)
        .key("name")
        .value(e.name)
        .key("pid")
        .value(e.pid)
        .key("method")
        .value(e.method)
        .key("path")
        .value(e.path)
        .key("detail")
        .value(e.detail)
        .end_object();
  }
  w.end_array();
}

void write_cluster(util::JsonWriter& w, const ClusterLocks& c,
                   std::chrono::system_clock::time_point now) {
  w.begin_object()
      .key("backend")
      .value(c.backend)
      .key("hosts")
      .value(static_cast<uint64_t>(c.hosts))
      .key("connections")
      .value(static_cast<uint64_t>(c.connections))
      .key("error");
  if (c.error.empty()) {
    w.null();
  } else {
    w.value(c.error);
  }
  w.key("locks");
  write_rows(w, c.locks, now, write_cluster_entry);
  w.key("host_stats_error");
  if (c.host_stats_error.empty()) {
    w.null();
  } else {
    w.value(c.host_stats_error);
  }
  w.key("host_stats").begin_array();
  for (const stats::HostStatsRow& row : c.host_stats) {
    w.begin_object().key("host").value(row.host).key("age_ms").value(row.age_ms).key("stats");
    write_stats(w, row.stats);
    w.key("events");
    write_events(w, row.stats.events);
    w.end_object();
  }
  w.end_array().end_object();
}

// One histogram series; `labels` is `name="value"` (already escaped).
void histogram_metric(std::string& out, const std::string& metric, const std::string& labels,
                      const util::HistogramSnapshot& h) {
  uint64_t cumulative = 0;
  const std::string& p = labels;
  for (size_t i = 0; i + 1 < util::kHistogramBuckets; ++i) {
    cumulative += h.buckets[i];
    const double le = static_cast<double>(util::HistogramSnapshot::upper_bound_us(i)) / 1e6;
    out += metric + "_bucket{" + p + ",le=\"" + seconds_text(le) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += metric + "_bucket{" + p + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
  out += metric + "_sum{" + p + "} " + seconds_text(static_cast<double>(h.sum_us) / 1e6) + "\n";
  out += metric + "_count{" + p + "} " + std::to_string(h.count) + "\n";
}

std::string who(const lock::RegistryEntry& e) {
  return e.method + " " + e.path + " (" + e.request_id + ", " + e.client_address + ")";
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// The heading's name for a backend: the server people know.
std::string backend_title(const std::string& backend) {
  if (backend == "postgres") return "PostgreSQL";
  return backend == "lockd" ? "kagi-lockd" : backend;
}

// Each host's published sums, one line a host.
void host_stats_text(const ClusterLocks& c, std::string& out) {
  if (!c.host_stats_error.empty()) {
    out += "host stats: cannot read them: " + c.host_stats_error + "\n";
    return;
  }
  if (c.host_stats.empty()) return;
  out += pad("HOST", 28) + pad("PROCS", 7) + pad("REQUESTS", 11) + pad("LOCKS", 11) +
         pad("WAITED", 9) + pad("TIMEOUTS", 10) + "UPDATED\n";
  for (const stats::HostStatsRow& row : c.host_stats) {
    uint64_t requests = 0;
    for (const auto& [route, r] : row.stats.requests.routes) requests += r.total();
    const lock::PrefixStatsSnapshot total = row.stats.stats.total();
    out += pad(row.host, 27) + " " + pad(std::to_string(row.stats.processes), 7) +
           pad(std::to_string(requests), 11) + pad(std::to_string(total.acquisitions), 11) +
           pad(std::to_string(total.contended), 9) + pad(std::to_string(total.timeouts), 10) +
           format_duration(milliseconds(row.age_ms)) + " ago\n";
  }
}

// "4.2 s left" or "expired 3.0 s ago".
std::string lease_text(int64_t left_ms) {
  return left_ms >= 0 ? format_duration(milliseconds(left_ms)) + " left"
                      : "expired " + format_duration(milliseconds(-left_ms)) + " ago";
}

// The cluster's section of the terminal table; nothing for a one-host backend.
void cluster_text(const LockStatus& s, std::string& out) {
  if (!s.cluster) return;
  const ClusterLocks& c = *s.cluster;
  out += "\nacross hosts (" + backend_title(c.backend) + ")";
  if (!c.error.empty()) {
    out += ": error: cannot read the lock server: " + c.error + "\n";
    return;
  }
  // dir: the hosts holding something, from the owner records; there are no connections.
  out += " — " + std::to_string(c.hosts) + " host(s)" +
         (c.backend == "dir" ? std::string()
                             : ", " + std::to_string(c.connections) + " connection(s)") +
         "\n";
  host_stats_text(c, out);
  if (c.locks.empty()) {
    out += "no locks held or waited for on any host\n";
    return;
  }
  out += pad("NAME", 28) + pad("STATE", 9) + pad("MODE", 10) + pad("FOR", 10) +
         pad("HOST/PID", 24) + "REQUEST\n";
  auto line = [&](const std::string& name, const char* state, const lock::RegistryEntry& e) {
    const std::optional<int64_t> for_ms = cluster_for_ms(e, s.now);
    out += pad(name, 27) + " " + pad(state, 9) + pad(std::string(lock::to_string(e.mode)), 10) +
           pad(for_ms ? format_duration(milliseconds(*for_ms)) : "?", 10) +
           pad(e.host + "/" + std::to_string(e.pid), 24) +
           (e.method.empty() ? e.request_id : e.method + " " + e.path + " (" + e.request_id + ")") +
           (e.record.empty() ? std::string()
                             : "  lease " + lease_text(lease_left_ms(e, s.now)) + ", token " +
                                   std::to_string(e.token)) +
           (e.client_address.empty() ? "" : " from " + e.client_address) + "\n";
  };
  for (const LockRow& row : c.locks) {
    for (const auto& e : row.holders) line(row.name, "held", e);
    for (const auto& e : row.waiters) line(row.holders.empty() ? row.name : "  \\_", "waiting", e);
  }
}

// The cluster's section of the page (templates/admin/locks.html, {{#CLUSTER}}): one table row
// per holder and per waiter, no Revoke form (the server's records have no registry slot).
void cluster_dict(const LockStatus& s, view::Dict& dict) {
  if (!s.cluster) return;
  const ClusterLocks& c = *s.cluster;
  view::Dict section = dict.add_section("CLUSTER");
  section.set("BACKEND", backend_title(c.backend));
  const bool dir = c.backend == "dir";
  if (!c.error.empty()) {
    section.add_section("CLUSTER_ERROR").set("ERROR", c.error);
    return;
  }
  view::Dict d = section.add_section("CLUSTER_READ");
  d.set("HOSTS", static_cast<int64_t>(c.hosts));
  d.set("CONNECTIONS", static_cast<int64_t>(c.connections));
  d.show_section(dir ? "DIR_RECORDS" : "LOCK_SERVER");
  if (dir) d.show_section("DIR_HEAD");
  if (!c.host_stats_error.empty())
    d.add_section("HOST_STATS_ERROR").set("ERROR", c.host_stats_error);
  for (const stats::HostStatsRow& row : c.host_stats) {
    uint64_t requests = 0, errors = 0;
    for (const auto& [route, r] : row.stats.requests.routes) {
      requests += r.total();
      for (const auto& [status, n] : r.by_status) errors += status >= 500 ? n : 0;
    }
    const lock::PrefixStatsSnapshot total = row.stats.stats.total();
    view::Dict h = d.add_section("CLUSTER_HOST");
    h.set("HOST", row.host);
    h.set("PROCESSES", static_cast<int64_t>(row.stats.processes));
    h.set("REQUESTS", static_cast<int64_t>(requests));
    h.set("ERRORS", static_cast<int64_t>(errors));
    h.set("ACQUISITIONS", static_cast<int64_t>(total.acquisitions));
    h.set("CONTENDED", static_cast<int64_t>(total.contended));
    h.set("TIMEOUTS", static_cast<int64_t>(total.timeouts));
    h.set("WAIT_P99", static_cast<int64_t>(total.wait.quantile_bound_us(0.99)));
    h.set("AGE", format_duration(milliseconds(row.age_ms)));
  }
  if (!dir) d.show_section("HOST_TABLE");
  if (!dir && c.host_stats.empty() && c.host_stats_error.empty())
    d.show_section("NO_CLUSTER_HOSTS");
  size_t held = 0, waiting = 0;
  auto add_row = [&](const std::string& name, const lock::RegistryEntry& e) {
    const std::optional<int64_t> known = cluster_for_ms(e, s.now);
    const int64_t for_ms = known.value_or(0);
    view::Dict r = d.add_section("CLUSTER_LOCK");
    r.set("NAME", name);
    r.set("STATE", e.waiting ? "waiting" : "held");
    r.set("MODE", lock::to_string(e.mode));
    r.set("FOR_MS", for_ms);
    r.set("FOR", known ? format_duration(milliseconds(for_ms)) : "unknown");
    r.set("HOST", e.host.empty() ? std::string("—") : e.host);
    r.set("PID", e.pid);
    // No route when the statement is not kagi's or hidden from this role (docs/ADMIN.md).
    r.set("ROUTE", e.method.empty() ? std::string("—") : e.method + " " + e.path);
    r.set("REQUEST_ID", e.request_id);
    r.set("CLIENT", e.client_address.empty() ? std::string("—") : e.client_address);
    r.set("ROW_CLASS", !e.waiting && for_ms >= kLongHold.count() ? "long" : "");
    if (!e.record.empty()) {
      const int64_t left = lease_left_ms(e, s.now);
      view::Dict cells = r.add_section("DIR_CELLS");
      cells.set("LEASE_LEFT_MS", left);
      cells.set("LEASE", lease_text(left) + " (renewed " +
                             format_duration(milliseconds(lease_age_ms(e, s.now))) + " ago)");
      cells.set("TOKEN", std::to_string(e.token));
      // Only a lease expired by more than the clock-skew margin can be broken (admin.cpp
      // checks again, on the record's name).
      if (left < -c.break_margin.count()) cells.add_section("BREAK").set("RECORD", e.record);
      if (left < 0) r.set("ROW_CLASS", "bad");
    }
  };
  for (const LockRow& row : c.locks) {
    for (const auto& e : row.holders) add_row(row.name, e);
    for (const auto& e : row.waiters) add_row(row.name, e);
    held += row.holders.size();
    waiting += row.waiters.size();
  }
  d.set("HELD", static_cast<int64_t>(held));
  d.set("WAITING_TOTAL", static_cast<int64_t>(waiting));
  if (c.locks.empty()) d.show_section("NO_CLUSTER_LOCKS");
}

// Two gauges per `label_name` value: <family>_held and <family>_waiting (locks held and waits
// in progress right now, `where`).
void held_waiting_gauges(std::string& out, const std::string& family, const std::string& where,
                         const std::string& label_name,
                         const std::map<std::string, std::pair<uint64_t, uint64_t>>& counts) {
  out += "# HELP " + family + "_held Locks held right now, " + where + ".\n# TYPE " + family +
         "_held gauge\n";
  for (const auto& [key, hw] : counts) {
    out += family + "_held{" + label_name + "=\"" + label(key) + "\"} " + std::to_string(hw.first) +
           "\n";
  }
  out += "# HELP " + family + "_waiting Lock waits in progress, " + where + ".\n# TYPE " + family +
         "_waiting gauge\n";
  for (const auto& [key, hw] : counts) {
    out += family + "_waiting{" + label_name + "=\"" + label(key) + "\"} " +
           std::to_string(hw.second) + "\n";
  }
}

// The lock server's view (only for a backend that spans hosts): whether it could be read and,
// when it could, the hosts connected and the locks held and waited for per host. Nothing but
// kagi_cluster_up when it could not: zeros there would claim that nothing is held.
// One number per host that publishes its stats (stats/cluster_stats.hpp).
struct HostMetric {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const stats::HostStatsRow&);
};
constexpr HostMetric kHostMetrics[] = {
    {"kagi_cluster_host_processes", "gauge", "Live kagi processes of the host.",
     [](const stats::HostStatsRow& r) { return static_cast<double>(r.stats.processes); }},
    {"kagi_cluster_host_requests_total", "counter", "Requests the host answered.",
     [](const stats::HostStatsRow& r) {
       uint64_t n = 0;
       for (const auto& [route, rs] : r.stats.requests.routes) n += rs.total();
       return static_cast<double>(n);
     }},
    {"kagi_cluster_host_lock_acquisitions_total", "counter", "Locks the host acquired.",
     [](const stats::HostStatsRow& r) {
       return static_cast<double>(r.stats.stats.total().acquisitions);
     }},
    {"kagi_cluster_host_lock_contended_total", "counter", "The host's acquisitions that waited.",
     [](const stats::HostStatsRow& r) {
       return static_cast<double>(r.stats.stats.total().contended);
     }},
    {"kagi_cluster_host_lock_timeouts_total", "counter", "The host's lock waits that timed out.",
     [](const stats::HostStatsRow& r) {
       return static_cast<double>(r.stats.stats.total().timeouts);
     }},
    {"kagi_cluster_host_stats_age_seconds", "gauge", "How old the host's published stats are.",
     [](const stats::HostStatsRow& r) { return static_cast<double>(r.age_ms) / 1000.0; }},
};

void host_stats_metrics(const ClusterLocks& c, std::string& out) {
  for (const HostMetric& m : kHostMetrics) {
    out +=
        std::string("# HELP ") + m.name + " " + m.help + "\n# TYPE " + m.name + " " + m.type + "\n";
    for (const stats::HostStatsRow& row : c.host_stats) {
      char value[32];
      std::snprintf(value, sizeof value, "%.15g", m.value(row));
      out += std::string(m.name) + "{host=\"" + label(row.host) + "\"} " + value + "\n";
    }
  }
}

void cluster_metrics(const ClusterLocks& c, std::string& out) {
  out +=
      "# HELP kagi_cluster_up Whether the lock server shared by the hosts could be read (1) or "
      "not (0).\n"
      "# TYPE kagi_cluster_up gauge\n"
      "kagi_cluster_up " +
      std::string(c.error.empty() ? "1" : "0") + "\n";
  if (!c.error.empty()) return;
  out +=
      "# HELP kagi_cluster_hosts Hosts with a kagi connection to the lock server.\n"
      "# TYPE kagi_cluster_hosts gauge\n"
      "kagi_cluster_hosts " +
      std::to_string(c.hosts) + "\n";
  out +=
      "# HELP kagi_cluster_connections Connections of kagi processes to the lock server, in use or "
      "idle.\n"
      "# TYPE kagi_cluster_connections gauge\n"
      "kagi_cluster_connections " +
      std::to_string(c.connections) + "\n";
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_host;  // host → held, waiting
  for (const LockRow& row : c.locks) {
    for (const auto& e : row.holders) ++per_host[e.host].first;
    for (const auto& e : row.waiters) ++per_host[e.host].second;
  }
  held_waiting_gauges(out, "kagi_cluster_locks", "on the lock server, per host", "host", per_host);
  host_stats_metrics(c, out);
}

// The page's storage section (templates/admin/locks.html, {{#STORAGE}}): shown once group
// commit has made a round or a start replayed the journal (data.fsync = "always" on files).
void store_dict(const store::StoreStats& st, view::Dict& dict) {
  if (st == store::StoreStats{}) {
    dict.show_section("NO_STORAGE");
    return;
  }
  view::Dict d = dict.add_section("STORAGE");
  for (const store::StoreField& f : store::kStoreFields) {
    std::string key(f.key);
    std::transform(key.begin(), key.end(), key.begin(), [](char ch) { return std::toupper(ch); });
    d.set(key, static_cast<int64_t>(st.*f.member));
  }
  // Averages over the rounds: what a round shares, and what its flush costs.
  const double rounds = static_cast<double>(std::max<uint64_t>(st.rounds, 1));
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(st.round_requests) / rounds);
  d.set("PER_ROUND", std::string(text));
  d.set("FLUSH_US", static_cast<int64_t>(static_cast<double>(st.round_flush_us) / rounds));
}

}  // namespace

std::string format_duration(milliseconds d) {
  const int64_t ms = std::max<int64_t>(0, d.count());
  char buf[48];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%" PRId64 " ms", ms);
  } else if (ms < 60000) {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRId64 " min %" PRId64 " s", ms / 60000,
                  (ms % 60000) / 1000);
  }
  return buf;
}

std::vector<LockRow> group_entries(std::vector<lock::RegistryEntry> entries) {
  std::map<std::string, LockRow> by_name;
  for (lock::RegistryEntry& e : entries) {
    LockRow& row = by_name[e.name];
    row.name = e.name;
    (e.waiting ? row.waiters : row.holders).push_back(std::move(e));
  }
  std::vector<LockRow> rows;
  for (auto& [name, row] : by_name) {
    auto by_since = [](const lock::RegistryEntry& a, const lock::RegistryEntry& b) {
      return a.since < b.since;
    };
    std::sort(row.holders.begin(), row.holders.end(), by_since);
    std::sort(row.waiters.begin(), row.waiters.end(), by_since);
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const LockRow& a, const LockRow& b) {
    if (a.holders.empty() != b.holders.empty()) return !a.holders.empty();
    if (a.holders.empty()) return false;
    return a.holders.front().since < b.holders.front().since;
  });
  return rows;
}

LockStatus collect_status(const std::string& locks_dir, const lock::LockOptions& locks,
                          milliseconds cluster_timeout) {
  LockStatus s;
  // The server first: its answer may take up to cluster_timeout, and `now` (what every
  // for_ms is measured against) must not be older than any `since` read.
  lock::ClusterStatus cluster = lock::read_cluster_status(locks, cluster_timeout);
  if (cluster.spans_hosts) {
    ClusterLocks& c = s.cluster.emplace();
    c.backend = std::move(cluster.backend);
    c.hosts = cluster.hosts;
    c.connections = cluster.connections;
    c.break_margin = cluster.break_margin;
    c.error = std::move(cluster.error);
    c.locks = group_entries(std::move(cluster.entries));
    // Published host sums live in PostgreSQL (stats/cluster_stats.hpp): postgres only.
    if (c.error.empty() && c.backend == "postgres") {
      c.host_stats =
          stats::read_cluster_stats(locks.postgres, cluster_timeout, &c.host_stats_error);
    }
  }
  lock::RegistrySnapshot snap = lock::Registry::read(locks_dir);
  s.now = std::chrono::system_clock::now();
  s.served_by = ::getpid();
  s.processes = snap.processes;
  s.locks = group_entries(std::move(snap.entries));
  s.host = stats::read_host_stats(locks_dir);
  return s;
}

std::string to_json(const LockStatus& s) {
  util::JsonWriter w;
  w.begin_object()
      .key("version")
      .value(1)
      .key("generated_at")
      .value(iso_time(unix_ms(s.now)))
      .key("served_by")
      .begin_object()
      .key("pid")
      .value(s.served_by)
      .end_object()
      .key("processes")
      .value(static_cast<uint64_t>(s.processes))
      .key("long_hold_ms")
      .value(static_cast<int64_t>(kLongHold.count()))
      .key("locks");
  write_rows(w, s.locks, s.now, write_entry);
  w.key("cluster");
  if (s.cluster) {
    write_cluster(w, *s.cluster, s.now);
  } else {
    w.null();
  }
  w.key("stats");
  write_stats(w, s.host);
  w.key("events");
  write_events(w, s.host.events);
  w.key("offline");
  if (s.offline) {
    write_offline_json(w, *s.offline);
  } else {
    w.null();
  }
  w.end_object();
  return w.take();
}

std::string to_prometheus(const LockStatus& s) {
  std::string out;
  struct Counter {
    const char* name;
    const char* help;
    uint64_t lock::PrefixStatsSnapshot::*field;
  };
  static constexpr Counter kCounters[] = {
      {"kagi_lock_acquisitions_total", "Locks acquired, per name prefix.",
       &lock::PrefixStatsSnapshot::acquisitions},
      {"kagi_lock_contended_total", "Acquisitions that had to wait.",
       &lock::PrefixStatsSnapshot::contended},
      {"kagi_lock_timeouts_total", "Waits that ended in a timeout (503).",
       &lock::PrefixStatsSnapshot::timeouts},
      {"kagi_lock_order_violations_total", "Locks taken out of canonical order.",
       &lock::PrefixStatsSnapshot::order_violations},
      {"kagi_lock_leaks_total", "Locks still held when their request ended.",
       &lock::PrefixStatsSnapshot::leaks},
      {"kagi_lock_revocations_total",
       "Locks taken from their holder: held past locks.max_hold_ms, or revoked by an admin.",
       &lock::PrefixStatsSnapshot::revocations},
  };
  for (const Counter& c : kCounters) {
    out += std::string("# HELP ") + c.name + " " + c.help + "\n# TYPE " + c.name + " counter\n";
    for (const auto& [prefix, p] : s.host.stats.prefixes) {
      out += std::string(c.name) + "{prefix=\"" + label(prefix) + "\"} " +
             std::to_string(p.*(c.field)) + "\n";
    }
  }
  out +=
      "# HELP kagi_lock_wait_seconds Time waited for a lock.\n"
      "# TYPE kagi_lock_wait_seconds histogram\n";
  for (const auto& [prefix, p] : s.host.stats.prefixes) {
    histogram_metric(out, "kagi_lock_wait_seconds", "prefix=\"" + label(prefix) + "\"", p.wait);
  }
  out +=
      "# HELP kagi_lock_hold_seconds Time a lock was held.\n"
      "# TYPE kagi_lock_hold_seconds histogram\n";
  for (const auto& [prefix, p] : s.host.stats.prefixes) {
    histogram_metric(out, "kagi_lock_hold_seconds", "prefix=\"" + label(prefix) + "\"", p.hold);
  }
  // Held-now and waiting-now gauges per prefix (the name without its last segment).
  std::map<std::string, std::pair<uint64_t, uint64_t>> now;
  for (const auto& [prefix, p] : s.host.stats.prefixes) now[prefix];
  for (const LockRow& row : s.locks) {
    size_t slash = row.name.rfind('/');
    auto& [held, waiting] = now[slash == std::string::npos ? row.name : row.name.substr(0, slash)];
    held += row.holders.size();
    waiting += row.waiters.size();
  }
  held_waiting_gauges(out, "kagi_lock", "every process on the host", "prefix", now);
  out +=
      "# HELP kagi_worker_processes Worker processes with a live lock registry.\n"
      "# TYPE kagi_worker_processes gauge\n"
      "kagi_worker_processes " +
      std::to_string(s.processes) + "\n";
  if (s.cluster) cluster_metrics(*s.cluster, out);
  if (s.offline) offline_metrics(*s.offline, out);
  out +=
      "# HELP kagi_requests_total Responses sent, per route and status code.\n"
      "# TYPE kagi_requests_total counter\n";
  for (const auto& [route, r] : s.host.requests.routes) {
    for (const auto& [status, n] : r.by_status) {
      out += "kagi_requests_total{route=\"" + label(route) + "\",code=\"" + std::to_string(status) +
             "\"} " + std::to_string(n) + "\n";
    }
  }
  out +=
      "# HELP kagi_request_duration_seconds Time from a request's arrival to its response.\n"
      "# TYPE kagi_request_duration_seconds histogram\n";
  for (const auto& [route, r] : s.host.requests.routes) {
    histogram_metric(out, "kagi_request_duration_seconds", "route=\"" + label(route) + "\"",
                     r.duration);
  }
  for (const store::StoreField& f : store::kStoreFields)
    store_metric(out, f, s.host.storage.*f.member);
  return out;
}

std::string to_text(const LockStatus& s) {
  std::string out = "kagi locks at " + iso_time(unix_ms(s.now)) + " — " +
                    std::to_string(s.processes) + " process(es)\n";
  if (s.locks.empty()) {
    out += "no locks held or waited for\n";
    cluster_text(s, out);
    if (s.offline) offline_text(*s.offline, out);
    return out;
  }
  out += pad("NAME", 28) + pad("STATE", 9) + pad("MODE", 10) + pad("FOR", 10) +
         pad("PID/THREAD", 16) + "REQUEST\n";
  auto line = [&](const std::string& name, const char* state, const lock::RegistryEntry& e) {
    out += pad(name, 27) + " " + pad(state, 9) + pad(std::string(lock::to_string(e.mode)), 10) +
           pad(format_duration(milliseconds(ms_between(e.since, s.now))), 10) +
           pad(std::to_string(e.pid) + "/" + std::to_string(e.thread), 16) + who(e) + "\n";
  };
  for (const LockRow& row : s.locks) {
    for (const auto& e : row.holders) line(row.name, "held", e);
    for (const auto& e : row.waiters) line(row.holders.empty() ? row.name : "  \\_", "waiting", e);
  }
  cluster_text(s, out);
  if (s.offline) offline_text(*s.offline, out);
  return out;
}

void fill_dict(const LockStatus& s, view::Dict& dict) {
  dict.set("GENERATED_AT", iso_time(unix_ms(s.now)));
  dict.set("SERVED_BY", s.served_by);
  dict.set("PROCESSES", static_cast<int64_t>(s.processes));
  dict.set("STATS_PROCESSES", static_cast<int64_t>(s.host.processes));
  dict.set("LONG_HOLD", format_duration(kLongHold));
  size_t held = 0, waiting = 0;
  for (const LockRow& row : s.locks) {
    held += row.holders.size();
    waiting += row.waiters.size();
    // One table row per holder; a name with only waiters gets one row with no holder.
    const size_t rows = std::max<size_t>(1, row.holders.size());
    for (size_t i = 0; i < rows; ++i) {
      view::Dict r = dict.add_section("LOCK");
      r.set("NAME", row.name);
      if (i < row.holders.size()) {
        const auto& e = row.holders[i];
        const int64_t for_ms = ms_between(e.since, s.now);
        r.set("MODE", lock::to_string(e.mode));
        r.set("REQUEST_ID", e.request_id);
        r.set("ROUTE", e.method + " " + e.path);
        r.set("CLIENT", e.client_address);
        r.set("PID", e.pid);
        r.set("THREAD", static_cast<int64_t>(e.thread));
        r.set("FOR_MS", for_ms);
        r.set("FOR", format_duration(milliseconds(for_ms)));
        r.set("ROW_CLASS", for_ms >= kLongHold.count() ? "long" : "");
        // What the revoke button posts: exactly this record (admin.cpp, /admin/locks/revoke).
        view::Dict revoke = r.add_section("REVOKE");
        revoke.set("SLOT", static_cast<int64_t>(e.slot));
        revoke.set("SEQ", std::to_string(e.seq));
      } else {
        r.set("MODE", "—");
        r.set("FOR_MS", int64_t{0});
        r.set("FOR", "not held");
      }
      if (i == 0) {
        r.set("WAITING", static_cast<int64_t>(row.waiters.size()));
        for (const auto& w : row.waiters) {
          view::Dict q = r.add_section("WAITER");
          q.set("MODE", lock::to_string(w.mode));
          q.set("ROUTE", w.method + " " + w.path);
          q.set("REQUEST_ID", w.request_id);
          q.set("CLIENT", w.client_address);
          q.set("PID", w.pid);
          q.set("FOR", format_duration(milliseconds(ms_between(w.since, s.now))));
        }
      } else {
        r.set("WAITING", int64_t{0});
      }
    }
  }
  dict.set("HELD", static_cast<int64_t>(held));
  dict.set("WAITING_TOTAL", static_cast<int64_t>(waiting));
  if (s.locks.empty()) dict.show_section("NO_LOCKS");
  cluster_dict(s, dict);
  if (s.offline) offline_dict(*s.offline, dict);
  for (const auto& [prefix, p] : s.host.stats.prefixes) {
    view::Dict r = dict.add_section("STAT");
    r.set("PREFIX", prefix);
    r.set("ACQUISITIONS", static_cast<int64_t>(p.acquisitions));
    r.set("CONTENDED", static_cast<int64_t>(p.contended));
    r.set("TIMEOUTS", static_cast<int64_t>(p.timeouts));
    r.set("ORDER_VIOLATIONS", static_cast<int64_t>(p.order_violations));
    r.set("LEAKS", static_cast<int64_t>(p.leaks));
    r.set("REVOCATIONS", static_cast<int64_t>(p.revocations));
    r.set("WAIT_P50", static_cast<int64_t>(p.wait.quantile_bound_us(0.5)));
    r.set("WAIT_P99", static_cast<int64_t>(p.wait.quantile_bound_us(0.99)));
    r.set("HOLD_P50", static_cast<int64_t>(p.hold.quantile_bound_us(0.5)));
    r.set("HOLD_P99", static_cast<int64_t>(p.hold.quantile_bound_us(0.99)));
    r.set("ROW_CLASS", p.timeouts + p.leaks + p.order_violations + p.revocations > 0 ? "bad" : "");
  }
  if (s.host.stats.prefixes.empty()) dict.show_section("NO_STATS");
  for (const auto& [route, rs] : s.host.requests.routes) {
    view::Dict r = dict.add_section("ROUTE");
    uint64_t by_class[6] = {};
    for (const auto& [status, n] : rs.by_status) by_class[std::clamp(status / 100, 1, 5)] += n;
    r.set("ROUTE", route);
    r.set("TOTAL", static_cast<int64_t>(rs.total()));
    r.set("S2XX", static_cast<int64_t>(by_class[2]));
    r.set("S3XX", static_cast<int64_t>(by_class[3]));
    r.set("S4XX", static_cast<int64_t>(by_class[4]));
    r.set("S5XX", static_cast<int64_t>(by_class[5]));
    r.set("P50", static_cast<int64_t>(rs.duration.quantile_bound_us(0.5)));
    r.set("P99", static_cast<int64_t>(rs.duration.quantile_bound_us(0.99)));
    r.set("ROW_CLASS", by_class[5] > 0 ? "bad" : "");
  }
  if (s.host.requests.routes.empty()) dict.show_section("NO_ROUTES");
  store_dict(s.host.storage, dict);
  for (const stats::Event& e : s.host.events) {
    view::Dict r = dict.add_section("EVENT");
    r.set("TIME", iso_time(e.unix_ms));
    r.set("KIND", e.kind);
    r.set("NAME", e.name);
    r.set("PID", e.pid);
    r.set("ROUTE", e.method.empty() ? std::string("—") : e.method + " " + e.path);
    r.set("DETAIL", e.detail);
  }
  if (s.host.events.empty()) dict.show_section("NO_EVENTS");
}

}  // namespace kagi::apps::admin
