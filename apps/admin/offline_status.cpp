#include "admin/offline_status.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <kagi/util/json.hpp>
#include <kagi/view/views.hpp>
#include "admin/status.hpp"

namespace kagi::apps::admin {
namespace {

using std::chrono::milliseconds;

// RFC 3339 UTC to the second: "2026-11-25T15:26:12Z".
std::string iso_second(int64_t ms) {
  const time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

struct CounterField {
  const char* name;  // JSON key; the metric is kagi_offline_<name>_total
  const char* help;
  int64_t offline::Counters::*field;
};
constexpr CounterField kCounters[] = {
    {"grants", "Offline locks granted (renewals not counted).", &offline::Counters::grants},
    {"denials", "Offline lock requests refused: held by another session, or too many.",
     &offline::Counters::denials},
    {"expiries", "Offline locks that ran out before their owner released them.",
     &offline::Counters::expiries},
    {"takeovers", "Offline locks taken over from their owner.", &offline::Counters::takeovers},
    {"releases", "Offline locks released by their owner.", &offline::Counters::releases},
    {"force_releases", "Offline locks released by an admin.", &offline::Counters::force_releases},
};

}  // namespace

OfflineStatus collect_offline(offline::LockManager& locks, offline::SessionStore& sessions,
                              size_t limit) {
  OfflineStatus s;
  s.now_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  auto listed = locks.list(limit);
  auto counted = locks.counters();
  if (!listed.ok() || !counted.ok()) {
    s.error = !listed.ok() ? listed.status().message() : counted.status().message();
    return s;
  }
  s.counters = *counted;
  for (offline::Holder& h : *listed) {
    OfflineLockRow row{.lock = std::move(h), .session_age_ms = std::nullopt};
    auto session = sessions.by_owner(row.lock.owner);
    if (session.ok() && *session) row.session_age_ms = s.now_ms - (*session)->created_ms;
    s.locks.push_back(std::move(row));
  }
  return s;
}

void write_offline_json(util::JsonWriter& w, const OfflineStatus& s) {
  w.begin_object();
  if (!s.error.empty()) w.key("error").value(s.error);
  w.key("locks").begin_array();
  for (const OfflineLockRow& r : s.locks) {
    w.begin_object()
        .key("key")
        .value(r.lock.key)
        .key("kind")
        .value(offline::kind_name(r.lock.kind))
        .key("owner")
        .value(r.lock.owner)
        .key("owner_name")
        .value(r.lock.owner_name)
        .key("session_age_ms");
    if (r.session_age_ms) {
      w.value(*r.session_age_ms);
    } else {
      w.null();
    }
    w.key("since")
        .value(iso_second(r.lock.since_ms))
        .key("expires")
        .value(iso_second(r.lock.expires_ms))
        .key("expires_in_ms")
        .value(r.lock.expires_ms - s.now_ms)
        .end_object();
  }
  w.end_array().key("counters").begin_object();
  for (const CounterField& c : kCounters) w.key(c.name).value(s.counters.*(c.field));
  w.end_object().end_object();
}

void offline_metrics(const OfflineStatus& s, std::string& out) {
  out +=
      "# HELP kagi_offline_up Whether the offline lock table could be read (1) or not (0).\n"
      "# TYPE kagi_offline_up gauge\n"
      "kagi_offline_up " +
      std::string(s.error.empty() ? "1" : "0") + "\n";
  if (!s.error.empty()) return;
  out +=
      "# HELP kagi_offline_locks_held Offline locks held now, by every session of the site.\n"
      "# TYPE kagi_offline_locks_held gauge\n"
      "kagi_offline_locks_held " +
      std::to_string(s.locks.size()) + "\n";
  for (const CounterField& c : kCounters) {
    const std::string name = std::string("kagi_offline_") + c.name + "_total";
    out += "# HELP " + name + " " + c.help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(s.counters.*(c.field)) + "\n";
  }
}

void offline_text(const OfflineStatus& s, std::string& out) {
  out += "\noffline locks (held by sessions, across requests)\n";
  if (!s.error.empty()) {
    out += "error: the offline lock table could not be read: " + s.error + "\n";
    return;
  }
  if (s.locks.empty()) {
    out += "none held\n";
    return;
  }
  out += pad("KEY", 28) + pad("KIND", 17) + pad("OWNER", 20) + pad("SINCE", 22) + "EXPIRES IN\n";
  for (const OfflineLockRow& r : s.locks) {
    out += pad(r.lock.key, 27) + " " + pad(std::string(offline::kind_name(r.lock.kind)), 17) +
           pad(r.lock.owner_name.empty() ? "(no name)" : r.lock.owner_name, 20) +
           pad(iso_second(r.lock.since_ms), 22) +
           format_duration(milliseconds(std::max<int64_t>(0, r.lock.expires_ms - s.now_ms))) + "\n";
  }
}

void offline_dict(const OfflineStatus& s, view::Dict& dict) {
  view::Dict section = dict.add_section("OFFLINE");
  if (!s.error.empty()) {
    section.add_section("OFFLINE_ERROR").set("ERROR", s.error);
    return;
  }
  view::Dict read = section.add_section("OFFLINE_READ");
  read.set("OFFLINE_HELD", static_cast<int64_t>(s.locks.size()));
  read.set("GRANTS", s.counters.grants);
  read.set("DENIALS", s.counters.denials);
  read.set("EXPIRIES", s.counters.expiries);
  read.set("TAKEOVERS", s.counters.takeovers);
  for (const OfflineLockRow& r : s.locks) {
    view::Dict row = read.add_section("OFFLINE_LOCK");
    row.set("KEY", r.lock.key);
    row.set("KIND", offline::kind_name(r.lock.kind));
    row.set("OWNER_NAME", r.lock.owner_name.empty() ? "(no name)" : r.lock.owner_name);
    row.set("OWNER", r.lock.owner);
    row.set("SESSION_AGE_MS", r.session_age_ms.value_or(-1));
    row.set("SESSION_AGE",
            r.session_age_ms ? format_duration(milliseconds(*r.session_age_ms)) : "ended");
    row.set("SINCE", iso_second(r.lock.since_ms));
    row.set("EXPIRES_MS", r.lock.expires_ms - s.now_ms);
    row.set(
        "EXPIRES",
        "in " + format_duration(milliseconds(std::max<int64_t>(0, r.lock.expires_ms - s.now_ms))));
  }
  if (s.locks.empty()) read.show_section("NO_OFFLINE_LOCKS");
}

}  // namespace kagi::apps::admin
