// admin/admin.hpp — the lock-status admin app: GET /admin/locks (HTML), /admin/locks.json and
// /metrics (Prometheus text), POST /admin/locks/revoke (the page's Revoke button, CSRF
// protected), all protected by admin.htpasswd + admin.allow (see access.hpp and
// docs/ADMIN.md).
//
//   kagi::App app(conf);
//   kagi::apps::mount_admin(app);   // no routes at all when admin.htpasswd is empty
#pragma once

#include <kagi/app/app.hpp>
#include <kagi/app/app_module.hpp>

namespace kagi::apps {

// Mounts the admin routes and starts this process's stats publisher (kagi/stats/host_stats.hpp), so
// pages served by any worker show every worker's counters. Call after any fork().
void mount_admin(App& app);

// The app with its [admin] conf keys, for kagi::serve.
AppModule admin_module();

}  // namespace kagi::apps
