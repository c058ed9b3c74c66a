// pg/options.hpp — what a PostgreSQL connection of kagi's is opened with.
//
// The connection string is the user's (any libpq form: "host=db1 dbname=site user=kagi" or
// "postgresql://kagi@db1/site"). kagi adds what it needs for dead-peer bounds and for the
// admin page, each only where the string leaves it unset (what the user wrote wins):
//   application_name           "kagi/<hostname>/<pid>": which process holds a connection
//   keepalives_* / tcp_user_timeout   the client side of the socket notices a vanished server
//   options=-c tcp_keepalives_* -c tcp_user_timeout=   the server side of the same socket
//                              notices a vanished client host, and ends its session (and so
//                              its advisory locks) within idle + interval × count seconds
// docs/DEPLOY.md ("More than one web host") gives the bounds these make.
#pragma once

#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace kagi::pg {

struct ConnectOptions {
  std::string dsn;               // libpq connection string or URI; empty = the libpq defaults
  std::string application_name;  // empty: default_application_name()
  // Use application_name even where the DSN names one (a connection that must not pass for a
  // lock holder: the admin's).
  bool force_application_name = false;
  int keepalives_idle_s = 10;       // idle seconds before the first keepalive probe
  int keepalives_interval_s = 3;    // seconds between probes
  int keepalives_count = 3;         // unanswered probes before the peer is declared dead
  int tcp_user_timeout_ms = 20000;  // unacknowledged data older than this: the peer is dead
};

// A libpq connection string as keyword/value pairs, in libpq's keyword order.
using DsnSettings = std::vector<std::pair<std::string, std::string>>;

// The settings `dsn` makes (either form: "host=db1 dbname=site" or "postgresql://db1/site"),
// or Errc::kBadOptions and, in `why`, libpq's reason. Connects to nothing.
std::error_code parse_dsn(const std::string& dsn, DsnSettings& out, std::string* why);
// Empty if `dsn` parses (parse_dsn without the settings).
std::error_code check_dsn(const std::string& dsn, std::string* why);

// "kagi/<hostname>/<pid>", cut to fit PostgreSQL's 63 bytes (the hostname is shortened).
std::string default_application_name();

// Parses "kagi/<host>/<pid>" back: false if `application_name` is not of that form.
bool parse_application_name(const std::string& application_name, std::string& host, int& pid);

}  // namespace kagi::pg
