// app/lock_conf.hpp — the lock layer's options from a site's conf (the locks.* keys), and
// where its sessions and offline locks live (data.*, session.*, offline.*).
//
// What App opens its LockService and offline state with; tools that lock what a site locks
// (kagi-fsck) or show it (kagi-locks) use the same, so that they see the site's backends.
#pragma once

#include <kagi/config/config.hpp>
#include <kagi/lock/options.hpp>
#include <kagi/offline/lock_manager.hpp>
#include <kagi/offline/session_store.hpp>
#include <kagi/offline/state_store.hpp>

namespace kagi {

lock::LockOptions lock_options(const Config& conf);

// Beside the data: SQLite in data.dir (data.backend = "files"), or the data's PostgreSQL
// database (data.postgres.dsn, default locks.postgres.dsn).
offline::StateOptions offline_state_options(const Config& conf);
offline::SessionOptions session_options(const Config& conf);
offline::ManagerOptions offline_lock_options(const Config& conf);

}  // namespace kagi
