#include "admin/admin.hpp"

#include <charconv>
#include <memory>

#include <kagi/app/http_error.hpp>
#include <kagi/lock/cluster_status.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/lock/registry.hpp>
#include <kagi/offline/lock_manager.hpp>
#include <kagi/offline/session_store.hpp>
#include <kagi/pg/options.hpp>
#include <kagi/stats/cluster_stats.hpp>
#include <kagi/stats/host_stats.hpp>
#include <kagi/store/damage.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/process.hpp>
#include <kagi/view/views.hpp>
#include "admin/access.hpp"
#include "admin/status.hpp"

namespace kagi::apps {
namespace {

using admin::Access;

// What every admin handler shares; owned by the routes, so it dies with the router (before
// the lock service it reads).
struct AdminState {
  AdminState(App& app)
      : access(app.conf().get_string("admin.htpasswd"), app.conf().get_strings("admin.allow")),
        locks_dir(lock::host_state_dir(app.locks().options())),
        locks(app.locks().options()),
        publisher(app.locks(), app.requests(),
                  {.damage = &store::damage_log(), .data = &app.data()}),
        cluster_publisher(cluster_publisher_for(locks)),
        offline_locks(app.offline_locks()),
        sessions(app.sessions()) {}

  // This host's registry and stats, (postgres backend) every host's locks from the server,
  // and the offline locks every session of the site holds.
  admin::LockStatus status() const {
    admin::LockStatus s = admin::collect_status(locks_dir, locks);
    s.offline = admin::collect_offline(offline_locks, sessions);
    return s;
  }

  admin::AdminAccess access;
  std::string locks_dir;
  // The site's lock backend as the workers open it: where the cluster view is read from.
  lock::LockOptions locks;
  stats::StatsPublisher publisher;
  // With locks on PostgreSQL: this host's sums, published for every host's admin page.
  std::unique_ptr<stats::ClusterStatsPublisher> cluster_publisher;
  offline::LockManager& offline_locks;
  offline::SessionStore& sessions;

 private:
  static std::unique_ptr<stats::ClusterStatsPublisher> cluster_publisher_for(
      const lock::LockOptions& locks) {
    if (locks.backend != "postgres") return nullptr;
    // The host as the cluster view names it: from the locks' application_name.
    std::string host;
    int pid = 0;
    const std::string name = locks.postgres.application_name.empty()
                                 ? pg::default_application_name()
                                 : locks.postgres.application_name;
    if (!pg::parse_application_name(name, host, pid)) host = util::host_name();
    return std::make_unique<stats::ClusterStatsPublisher>(
        lock::host_state_dir(locks), host, locks.postgres, stats::ClusterStatsPublisher::Options{});
  }
};

void require_access(const AdminState& state, const Request& req) {
  switch (state.access.check(req.client_address, req.headers.get("Authorization"))) {
    case Access::kOff:
      throw HttpError(404, "no such page");
    case Access::kForbidden:
      throw HttpError(403, "the admin pages are not open to " + req.client_address +
                               "; add the address to admin.allow");
    case Access::kUnauthorized:
      throw HttpError(401, "the admin pages need a user name and password from admin.htpasswd")
          .with_header("WWW-Authenticate", "Basic realm=\"kagi admin\", charset=\"UTF-8\"");
    case Access::kAllowed:
      return;
  }
}

template <typename T>
T number_field(const Request& req, std::string_view name) {
  const std::string_view text = req.field(name);
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw HttpError(400, "the revoke form needs a numeric '" + std::string(name) +
                             "' field; use the Revoke button of /admin/locks");
  }
  return value;
}

// POST /admin/locks/revoke (pid, slot, seq: one record of the status registry, as the page
// showed it). The pipeline has checked the CSRF token already (403 without it); the admin
// login is checked here. The owning worker's watchdog revokes the lock within a tenth of a
// second (lock/lock_service.hpp); the page then shows a "revoked" event.
Response revoke(const AdminState& state, const Request& req) {
  lock::RegistryEntry entry;
  entry.pid = number_field<int>(req, "pid");
  entry.slot = number_field<int>(req, "slot");
  entry.seq = number_field<uint64_t>(req, "seq");
  const std::error_code ec =
      lock::Registry::request_revoke(state.locks_dir, entry.pid, entry.slot, entry.seq);
  if (ec == lock::Errc::kReleased) {
    throw HttpError(409,
                    "that lock was released (or taken again) since the page was drawn; "
                    "reload /admin/locks and look again");
  }
  if (ec == std::errc::invalid_argument) {
    throw HttpError(400, "no such registry slot; use the Revoke button of /admin/locks");
  }
  if (ec) throw std::system_error(ec, "admin: revoke request for pid " + std::to_string(entry.pid));
  return Response::redirect("/admin/locks");
}

// POST /admin/offline/release (key, owner: one offline lock, as the page showed it). CSRF is
// checked by the pipeline, the login here. The owner is told on its next request; its save
// is refused (409) from now on.
Response release_offline(const AdminState& state, const Request& req) {
  const std::string_view key = req.field("key");
  const std::string_view owner = req.field("owner");
  if (key.empty() || owner.empty()) {
    throw HttpError(400,
                    "the release form needs the fields 'key' and 'owner'; use the Release button "
                    "of /admin/locks");
  }
  auto released = state.offline_locks.force_release(key, owner);
  if (!released.ok() && released.status().code() == std::errc::invalid_argument) {
    throw HttpError(400, released.status().message());
  }
  if (!released.value()) {
    throw HttpError(409,
                    "that offline lock is not held any more (released, run out, or taken over "
                    "since the page was drawn); reload /admin/locks and look again");
  }
  return Response::redirect("/admin/locks");
}

// POST /admin/locks/break (record: a dir backend owner record, as /admin/locks shows it). The
// pipeline has checked the CSRF token (403 without it); the admin login is checked here. Only a
// record still there under the very name the page showed, with its lease expired by more than
// locks.dir_max_clock_skew_ms (the margin of a contender's takeover), is removed (a renewed one
// has another name: 409), so the button can never break a live lock.
Response break_lock(const AdminState& state, const Request& req) {
  const std::string record(req.field("record"));
  const std::error_code ec = lock::break_stale_lock(state.locks, record);
  if (ec == lock::Errc::kReleased) {
    throw HttpError(409,
                    "that lock was released or renewed since the page was drawn; reload "
                    "/admin/locks and look again");
  }
  if (ec == std::errc::resource_unavailable_try_again) {
    throw HttpError(409,
                    "that lock's lease has not expired by more than locks.dir_max_clock_skew_ms: "
                    "its holder may still be renewing it");
  }
  if (ec == std::errc::invalid_argument) {
    throw HttpError(400,
                    "the break form needs the 'record' of a dir lock; use the Break button of "
                    "/admin/locks (locks.backend = \"dir\")");
  }
  if (ec) throw std::system_error(ec, "admin: break " + record);
  util::log_warn("admin: broke the stale dir lock record " + record + " from " +
                 req.client_address);
  return Response::redirect("/admin/locks");
}

// Admin data changes every second and may name clients: never cached anywhere.
Response no_store(Response r) {
  r.headers.set("Cache-Control", "no-store");
  return r;
}

}  // namespace

void mount_admin(App& app) {
  // With admin.htpasswd empty the routes do not exist (404 from the router) and no publisher
  // thread runs.
  if (app.conf().get_string("admin.htpasswd").empty()) return;
  auto state = std::make_shared<AdminState>(app);
  Router& r = app.router();
  r.get("/admin/locks", [state](Request& req, Context& ctx) {
    require_access(*state, req);
    view::Dict dict;
    admin::fill_dict(state->status(), dict);
    return no_store(ctx.render("admin/locks.html", dict));
  });
  r.get("/admin/locks.json", [state](Request& req, Context&) {
    require_access(*state, req);
    return no_store(Response::json(admin::to_json(state->status())));
  });
  r.post("/admin/locks/revoke", [state](Request& req, Context&) {
    require_access(*state, req);
    return no_store(revoke(*state, req));
  });
  r.post("/admin/offline/release", [state](Request& req, Context&) {
    require_access(*state, req);
    return no_store(release_offline(*state, req));
  });
  r.post("/admin/locks/break", [state](Request& req, Context&) {
    require_access(*state, req);
    return no_store(break_lock(*state, req));
  });
  r.get("/metrics", [state](Request& req, Context&) {
    require_access(*state, req);
    Response out = Response::text(admin::to_prometheus(state->status()));
    out.headers.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    return no_store(std::move(out));
  });
}

namespace {

using enum config::KeyType;

// The [admin] section of the conf (conf/kagi.toml documents each key at length).
constexpr config::KeySpec kAdminKeys[] = {
    config::KeySpec{"admin.htpasswd", kString, "", 0, 0, "",
                    "htpasswd file (bcrypt, htpasswd -B) for /admin/; empty = admin routes off"},
    config::KeySpec{"admin.allow", kStringList, "127.0.0.1,::1", 0, 0, "",
                    "client addresses allowed to reach /admin/"},
};

}  // namespace

AppModule admin_module() {
  return {"admin", kAdminKeys, "the lock-status admin pages (/admin/)", mount_admin};
}

}  // namespace kagi::apps
