// lock/options.hpp — what the lock layer is configured with (from the conf keys locks.*).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include <kagi/pg/options.hpp>

namespace kagi::lock {

// The lockd backend (locks.lockd.*): where kagi-lockd listens, how many connections a process
// keeps, and the dead-peer bounds of those connections (docs/LOCKD.md).
struct LockdOptions {
  std::string address = "127.0.0.1:1006";  // HOST:PORT, [V6]:PORT or unix:PATH
  size_t pool = 16;                        // most connections per process
  std::string secret_file;  // the server's shared secret (AUTH), for a server on another host
  int keepalive_idle_s = 10;
  int keepalive_interval_s = 3;
  int keepalive_count = 3;
  int user_timeout_ms = 20000;
  // How long after a wait's deadline the client still waits for the server's answer (the
  // server ends the wait itself at the deadline) before it gives the connection up.
  std::chrono::milliseconds grace{250};
};

struct LockOptions {
  std::string backend = "local";  // locks.backend: "local" | "postgres" | "dir" | "lockd"
  // locks.dir (created if missing): the local backend's lock files, and with every backend
  // this host's status registry and stats files (with `dir`, under hosts/<host id>/: the
  // folder may be shared by several hosts, see host_state_dir()).
  std::string dir = "var/locks";
  std::chrono::milliseconds timeout{3000};  // locks.timeout_ms: default bound on every wait
  bool order_check_fail = false;            // locks.order_check: "report" (false) | "fail"
  // locks.max_hold_ms: a lock held longer is revoked (released for the next waiter; its guard
  // is fenced, so a later commit through it is refused). 0: never. The conf default is 60000;
  // a bare LockOptions (tests, tools) has none.
  std::chrono::milliseconds max_hold{0};

  // The postgres backend (locks.postgres.*): where to connect and the dead-peer bounds
  // (pg/options.hpp), and the most connections a process opens.
  pg::ConnectOptions postgres;
  size_t postgres_pool = 16;
  // How long after a wait's deadline the postgres backend still waits for the server's answer
  // before it gives the connection up (the server ends the wait itself at the deadline).
  std::chrono::milliseconds postgres_grace{250};

  // The dir backend (locks.dir_*): lock directories under <dir>/dirlocks, shared by every host
  // that mounts the folder. A holder renews its lease every third of it; a record not renewed
  // for a whole lease (as a waiter sees it), or whose expiry is more than max_clock_skew past by
  // the waiter's clock, or whose holder on this very host is dead, is stale.
  std::chrono::milliseconds dir_lease{10000};           // locks.dir_lease_ms
  std::string dir_host_id;                              // locks.dir_host_id ("": the host name)
  std::chrono::milliseconds dir_max_clock_skew{30000};  // locks.dir_max_clock_skew_ms
  LockdOptions lockd;                                   // the lockd backend (locks.lockd.*)

  // Tuning (no conf keys yet; the defaults are what the benchmarks were run with).
  size_t max_idle_fds = 1024;    // lock file descriptors kept open for names not in use
  size_t registry_slots = 1024;  // locks this process can publish at once (held + waiting)
  bool registry = true;          // publish held / waited locks for the admin page
  // Real-time signal that bounds blocking waits (0: SIGRTMIN + 5; -1: poll with backoff).
  int wait_signal = 0;
  // How often the watchdog looks for holds past max_hold and for revoke requests from the
  // admin page (lock/lock_service.hpp). A revocation lands up to this late.
  std::chrono::milliseconds watchdog_interval{100};
};

// Where this host's status registry and stats files live: locks.dir, or with `dir` (a folder
// several hosts may share) locks.dir/hosts/<host id>, so that no host reads or cleans up
// another host's files.
std::string host_state_dir(const LockOptions& options);
// The dir backend's name for this host: locks.dir_host_id, else the host name.
std::string dir_host_id(const LockOptions& options);

}  // namespace kagi::lock
