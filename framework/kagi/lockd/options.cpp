#include <kagi/lockd/options.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include <kagi/util/utf8.hpp>

namespace kagi::lockd {
namespace {

using enum config::KeyType;

constexpr std::array kKeys{
    config::KeySpec{"lockd.listen", kStringList, "127.0.0.1:1006", 0, 0, "",
                    "addresses to listen on: HOST:PORT, [V6]:PORT or unix:PATH (--listen "
                    "replaces the list)"},
    config::KeySpec{"lockd.socket_mode", kString, "0660", 0, 0, "",
                    "octal mode of a unix socket kagi-lockd creates"},
    config::KeySpec{"lockd.socket_group", kString, "", 0, 0, "",
                    "group of a unix socket kagi-lockd creates (empty: its own group); "
                    "kagi-lockd's user must be a member"},
    config::KeySpec{"lockd.max_key_bytes", kInt, "256", 1, 65536, "",
                    "longest key; longer: error and close"},
    config::KeySpec{"lockd.max_line_bytes", kInt, "8192", 64, 1048576, "",
                    "longest command line; longer: error and close"},
    config::KeySpec{"lockd.max_keys_per_connection", kInt, "64", 1, 65536, "",
                    "keys one connection may hold (and ask for in one command)"},
    config::KeySpec{"lockd.max_connections", kInt, "50000", 1, 10000000, "",
                    "connections open at once; more: error and close"},
    config::KeySpec{"lockd.max_connections_per_address", kInt, "1024", 1, 10000000, "",
                    "connections from one client IP address not on loopback"},
    config::KeySpec{"lockd.max_local_connections", kInt, "0", 0, 10000000, "",
                    "connections from loopback and unix sockets together (0: bounded by "
                    "max_connections only)"},
    config::KeySpec{"lockd.max_queued_lines", kInt, "16", 1, 4096, "",
                    "lines a client may send while its wait is pending; more: error"},
    config::KeySpec{"lockd.idle_timeout_ms", kInt, "300000", 0, 86400000, "",
                    "a connection that holds nothing, waits for nothing and sends nothing "
                    "for this long is closed (0: never)"},
    config::KeySpec{"lockd.line_timeout_ms", kInt, "10000", 100, 3600000, "",
                    "a line begun must end within this (slow senders are closed)"},
    config::KeySpec{"lockd.keepalive_idle_s", kInt, "10", 1, 3600, "",
                    "idle seconds before TCP keepalive probes on a client's connection"},
    config::KeySpec{"lockd.keepalive_interval_s", kInt, "3", 1, 600, "",
                    "seconds between keepalive probes"},
    config::KeySpec{"lockd.keepalive_count", kInt, "3", 1, 100, "",
                    "unanswered probes before a silent client host counts as gone and its "
                    "locks are released (after idle + interval x count seconds; only with "
                    "user_timeout_ms = 0, else Linux ends it at the first probe past "
                    "user_timeout_ms)"},
    config::KeySpec{"lockd.user_timeout_ms", kInt, "20000", 0, 3600000, "",
                    "TCP_USER_TIMEOUT: data a client leaves unacknowledged this long ends "
                    "its connection, and a silent client is dropped at the first keepalive "
                    "probe past it (0: the kernel's default, and keepalive_count counts)"},
    config::KeySpec{"lockd.allow", kStringList, "", 0, 0, "",
                    "client addresses or networks (CIDR) allowed besides loopback and unix "
                    "sockets; others are closed at once"},
    config::KeySpec{"lockd.secret_file", kString, "", 0, 0, "",
                    "file with a shared secret that clients not on loopback must send first "
                    "(AUTH <secret>); empty: no secret"},
};

}  // namespace

std::span<const config::KeySpec> conf_keys() { return kKeys; }

ServerOptions server_options(const Config& conf) {
  ServerOptions o;
  o.listen = conf.get_strings("lockd.listen");
  const std::string mode = conf.get_string("lockd.socket_mode");
  size_t used = 0;
  try {
    o.socket_mode = std::stoi(mode, &used, 8);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != mode.size() || mode.empty() || o.socket_mode < 0 || o.socket_mode > 0777) {
    throw ConfigError("lockd.socket_mode = \"" + mode + "\" is not an octal mode like \"0660\"");
  }
  auto size = [&](std::string_view key) { return static_cast<size_t>(conf.get_int(key)); };
  auto ms = [&](std::string_view key) { return static_cast<int>(conf.get_int(key)); };
  o.max_key_bytes = size("lockd.max_key_bytes");
  o.max_line_bytes = size("lockd.max_line_bytes");
  o.max_keys_per_connection = size("lockd.max_keys_per_connection");
  o.max_connections = size("lockd.max_connections");
  o.max_connections_per_address = size("lockd.max_connections_per_address");
  o.max_local_connections = size("lockd.max_local_connections");
  o.socket_group = conf.get_string("lockd.socket_group");
  o.max_queued_lines = size("lockd.max_queued_lines");
  o.idle_timeout_ms = ms("lockd.idle_timeout_ms");
  o.line_timeout_ms = ms("lockd.line_timeout_ms");
  o.keepalive_idle_s = ms("lockd.keepalive_idle_s");
  o.keepalive_interval_s = ms("lockd.keepalive_interval_s");
  o.keepalive_count = ms("lockd.keepalive_count");
  o.user_timeout_ms = ms("lockd.user_timeout_ms");
  o.allow = conf.get_strings("lockd.allow");
  if (const std::string file = conf.get_string("lockd.secret_file"); !file.empty()) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      throw ConfigError("lockd.secret_file '" + file +
                        "' cannot be read (it must exist and be "
                        "readable by kagi-lockd's user)");
    }
    o.secret = text.str();
    while (!o.secret.empty() && (o.secret.back() == '\n' || o.secret.back() == '\r')) {
      o.secret.pop_back();
    }
    // AUTH carries it on one line: a secret it cannot carry would refuse every client.
    const bool control = std::any_of(o.secret.begin(), o.secret.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (o.secret.empty() || o.secret.size() > 512 || control || !util::valid_utf8(o.secret)) {
      throw ConfigError("lockd.secret_file '" + file +
                        "' must hold one line of 1 to 512 bytes of UTF-8 text without tabs or "
                        "other control characters (AUTH sends it on one line)");
    }
  }
  return o;
}

}  // namespace kagi::lockd
