// lock/cluster_status.hpp — what every web host holds and waits for, read from the lock server
// that they share (the postgres backend), for the admin page and kagi-locks.
//
// The status registry (lock/registry.hpp) shows one host's processes. With the postgres
// backend the server knows every host's locks: pg_locks (who holds or waits for which key),
// joined with pg_stat_activity (the connection's application_name "kagi/<host>/<pid>", and the
// comment "/*kagi <request id> <method> <path> */" every statement of the lock layer starts
// with) and kagi_lock_names (key → name). One query; its cost grows with the locks held on
// the server, not with traffic (docs/ADMIN.md). With the lockd backend it is kagi-lockd's
// STATUS: every holder and waiter with its client address, and kagi's CLIENT label (host,
// pid, request) where the holder is a kagi process (docs/LOCKD.md).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <kagi/lock/options.hpp>
#include <kagi/lock/registry.hpp>

namespace kagi::lock {

struct ClusterStatus {
  // False for a backend whose locks live on one host (local): the registry shows them all and
  // nothing else is read. True for postgres and lockd.
  bool spans_hosts = false;
  std::string backend;
  // Every holder and waiter on the server. `host` and `pid` are the kagi process's (from
  // application_name); `name` is "#<key>" for a key kagi_lock_names does not know; `since` is
  // the wait's start for a waiter and, for a holder, the start of its connection's latest
  // statement (the lock's or a later one of the same request). `thread`, `slot`, `seq` are
  // not known here; `client_address` is the holder's address as kagi-lockd sees it (lockd
  // only). A session of another role whose statements this role may not read
  // (pg_read_all_stats) has the request id "(hidden: ...)" and no `since` (the epoch).
  std::vector<RegistryEntry> entries;
  size_t hosts = 0;        // distinct kagi hosts connected now
  size_t connections = 0;  // kagi connections (in use or idle in a pool)
  std::string error;       // non-empty if the server could not be read: why
  // dir: how far past its expiry a record must be before break_stale_lock removes it
  // (locks.dir_max_clock_skew_ms); 0 for the other backends.
  std::chrono::milliseconds break_margin{0};
};

// Reads the cluster's locks with a connection of its own, within `timeout`. With `dir`, from
// the owner records under locks.dir (every host's holders; waiters are not recorded there,
// each host's registry shows its own): `hosts` counts the hosts holding something, and each
// entry carries its record, lease and token.
ClusterStatus read_cluster_status(const LockOptions& options, std::chrono::milliseconds timeout);

// dir backend, the admin's "break stale lock": removes the owner record `record` (as an entry
// of read_cluster_status names it) if it is still there under that very name and its lease
// expired more than locks.dir_max_clock_skew_ms ago by this host's clock (the margin a
// contender's takeover by expiry uses too). Errc::kReleased if it was released or renewed
// meanwhile; std::errc::resource_unavailable_try_again if its lease has not expired by more
// than that margin;
// std::errc::invalid_argument for a name that is no record (or another backend).
std::error_code break_stale_lock(const LockOptions& options, std::string_view record);

}  // namespace kagi::lock
