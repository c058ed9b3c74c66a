// lockd/options.hpp — what kagi-lockd is configured with: the [lockd] conf keys.
//
//   kagi::config::Schema schema = kagi::config::Schema::framework();
//   schema.add_section("lockd", lockd::conf_keys(), "the lock server");
//   kagi::Config conf = kagi::Config::load(schema, file, overrides);
//   lockd::ServerOptions options = lockd::server_options(conf);   // throws ConfigError
//
// Every key, its default and what it bounds is in conf/kagi-lockd.toml and docs/LOCKD.md.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <kagi/config/config.hpp>
#include <kagi/config/schema.hpp>

namespace kagi::lockd {

struct ServerOptions {
  // "HOST:PORT", "[V6]:PORT" or "unix:PATH"; the default is the seed's port on loopback.
  std::vector<std::string> listen = {"127.0.0.1:1006"};
  int socket_mode = 0660;  // of a unix socket kagi-lockd creates
  // Group of a unix socket kagi-lockd creates ("": kagi-lockd's own); kagi-lockd's user must
  // be a member of it (systemd: SupplementaryGroups=).
  std::string socket_group;
  size_t max_key_bytes = 256;
  size_t max_line_bytes = 8192;
  size_t max_keys_per_connection = 64;  // held, plus asked for in the command being served
  size_t max_connections = 50000;
  size_t max_connections_per_address = 1024;  // per client IP address not on loopback
  // From loopback and unix sockets together (this host's clients); 0: only max_connections.
  size_t max_local_connections = 0;
  size_t max_queued_lines = 16;  // lines received while a wait is pending
  int idle_timeout_ms = 300000;  // holding nothing, waiting for nothing, silent: closed (0 never)
  int line_timeout_ms = 10000;   // a line begun must end within this
  // Dead client hosts (no FIN): TCP keepalive and TCP_USER_TIMEOUT on accepted sockets. With
  // user_timeout_ms > 0, Linux drops a silent peer at the first keepalive probe at least
  // user_timeout_ms after it was last heard (the count is not used): idle + interval x
  // ceil((user_timeout - idle) / interval), 22 s with these defaults; with user_timeout_ms 0,
  // after idle + interval x count. One that stops acknowledging data: after user_timeout_ms.
  int keepalive_idle_s = 10;
  int keepalive_interval_s = 3;
  int keepalive_count = 3;
  int user_timeout_ms = 20000;
  // Client addresses or networks ("192.0.2.7", "10.1.0.0/16", "2001:db8::/32") allowed
  // besides loopback and unix sockets, which are always allowed.
  std::vector<std::string> allow;
  // The shared secret peers not on loopback must send first (AUTH <secret>); empty: none.
  std::string secret;
};

// The [lockd] keys, for a Schema (static storage).
std::span<const config::KeySpec> conf_keys();

// The options `conf` sets (a schema with conf_keys()). Reads lockd.secret_file; throws
// ConfigError when it cannot be read, or does not hold one line that AUTH can carry (1 to 512
// bytes of UTF-8 without control characters), or when socket_mode is not octal.
ServerOptions server_options(const Config& conf);

}  // namespace kagi::lockd
