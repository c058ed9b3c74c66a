#include <kagi/config/schema.hpp>

#include <array>
#include <stdexcept>
#include <string>

namespace kagi::config {
namespace {

using enum KeyType;
constexpr int64_t kMaxInt = int64_t{1} << 40;

constexpr std::array kKeys{
    // server
    KeySpec{"server.threads", kInt, "4", 1, 512, "", "worker threads per process"},
    KeySpec{"server.http", kString, "127.0.0.1:8080", 0, 0, "",
            "HTTP front end address when neither --http nor --fcgi is given"},
    KeySpec{"server.socket_mode", kString, "0660", 0, 0, "",
            "octal mode of a unix socket kagi creates for --fcgi unix:PATH"},
    KeySpec{"server.shutdown_timeout_ms", kInt, "10000", 0, 600000, "",
            "on SIGTERM, how long in-flight requests may take to finish"},
    KeySpec{"server.idle_timeout_ms", kInt, "30000", 100, 3600000, "",
            "HTTP front end: longest wait for a request's header block, its body, or a write "
            "of its answer; longer → the connection is closed"},
    KeySpec{"server.max_connections", kInt, "10000", 1, 1000000, "",
            "HTTP front end: connections open at once; more → 503"},
    KeySpec{"server.behind_https", kBool, "false", 0, 0, "",
            "the site is served over https: cookies get Secure"},
    // limits
    KeySpec{"limits.max_body_bytes", kInt, "1048576", 0, kMaxInt, "",
            "largest request body; larger → 413"},
    KeySpec{"limits.max_header_bytes", kInt, "16384", 1024, 1048576, "",
            "largest request header block (HTTP front end); larger → 431"},
    KeySpec{"limits.max_fields", kInt, "1000", 1, 1000000, "",
            "most form fields, query parameters or cookies; more → 413"},
    KeySpec{"limits.max_field_bytes", kInt, "65536", 1, kMaxInt, "",
            "largest decoded form field value; larger → 413"},
    KeySpec{"limits.fcgi_read_timeout_ms", kInt, "10000", 100, 600000, "",
            "FastCGI: a request's params must arrive within this of its first byte (else the "
            "connection is dropped); a response unread for this long is given up"},
    KeySpec{"limits.body_timeout_ms", kInt, "30000", 100, 3600000, "",
            "FastCGI: a request body must arrive within this of the end of its params; "
            "slower → 408"},
    // locks
    KeySpec{"locks.backend", kString, "local", 0, 0, "local|postgres|dir|lockd",
            "lock backend: local (one host), postgres (many hosts, advisory locks), dir (hosts "
            "sharing locks.dir: lock directories with leases, no database) or lockd (a "
            "kagi-lockd server)"},
    KeySpec{"locks.dir", kString, "var/locks", 0, 0, "",
            "lock files (local), lock directories (dir: may be a folder the hosts share) and "
            "the status registry"},
    KeySpec{"locks.timeout_ms", kInt, "3000", 0, 3600000, "",
            "default bound on every lock wait; reached → 503"},
    KeySpec{"locks.retry_after_s", kInt, "2", 0, 3600, "", "Retry-After sent with a 503 busy page"},
    KeySpec{"locks.order_check", kString, "report", 0, 0, "report|fail",
            "a lock taken out of canonical order: log and count it, or also fail at once"},
    KeySpec{"locks.max_hold_ms", kInt, "60000", 0, 86400000, "",
            "a lock held longer is revoked: released for the next request, the holder's "
            "commits refused (0: never)"},
    KeySpec{"locks.postgres.dsn", kString, "", 0, 0, "",
            "postgres backend: libpq connection string or URI (required with it)"},
    KeySpec{"locks.postgres.pool", kInt, "16", 1, 10000, "",
            "postgres backend: most connections per process (one per request holding locks)"},
    KeySpec{"locks.postgres.application_name", kString, "", 0, 0, "",
            "postgres backend: application_name of its connections; empty = "
            "kagi/<hostname>/<pid> (the admin page reads host and pid from it)"},
    KeySpec{"locks.postgres.keepalives_idle_s", kInt, "10", 1, 3600, "",
            "postgres backend: idle seconds before TCP keepalive probes, both ends"},
    KeySpec{"locks.postgres.keepalives_interval_s", kInt, "3", 1, 600, "",
            "postgres backend: seconds between keepalive probes"},
    KeySpec{"locks.postgres.keepalives_count", kInt, "3", 1, 100, "",
            "postgres backend: unanswered probes before the peer counts as gone (a vanished "
            "host's locks are free after idle + interval x count seconds)"},
    KeySpec{"locks.postgres.tcp_user_timeout_ms", kInt, "20000", 0, 3600000, "",
            "postgres backend: unacknowledged data older than this ends the connection, both "
            "ends (0: the kernel's default)"},
    KeySpec{"locks.dir_lease_ms", kInt, "10000", 100, 3600000, "",
            "dir backend: a holder's lease, renewed every third of it; a record not renewed "
            "for this long is stale and taken over (a holder's later commit is refused)"},
    KeySpec{"locks.dir_host_id", kString, "", 0, 0, "",
            "dir backend: this host's name in owner records and under locks.dir/hosts/; "
            "empty = the host name; must differ between hosts sharing locks.dir"},
    KeySpec{"locks.dir_max_clock_skew_ms", kInt, "30000", 0, 86400000, "",
            "dir backend: a lease that expired longer ago than this by a waiter's clock is "
            "stale at once (the lease rule alone needs no clock agreement)"},
    KeySpec{"locks.lockd.address", kString, "127.0.0.1:1006", 0, 0, "",
            "lockd backend: where kagi-lockd listens (HOST:PORT, [V6]:PORT or unix:PATH)"},
    KeySpec{"locks.lockd.pool", kInt, "16", 1, 10000, "",
            "lockd backend: most connections per process (one per request holding locks)"},
    KeySpec{"locks.lockd.secret_file", kString, "", 0, 0, "",
            "lockd backend: file with the server's shared secret (lockd.secret_file), sent as "
            "AUTH on each new connection; empty: none"},
    KeySpec{"locks.lockd.keepalive_idle_s", kInt, "10", 1, 3600, "",
            "lockd backend: idle seconds before TCP keepalive probes to the server"},
    KeySpec{"locks.lockd.keepalive_interval_s", kInt, "3", 1, 600, "",
            "lockd backend: seconds between keepalive probes"},
    KeySpec{"locks.lockd.keepalive_count", kInt, "3", 1, 100, "",
            "lockd backend: unanswered probes before the server counts as gone (only with "
            "user_timeout_ms = 0; else the first probe past user_timeout_ms ends it)"},
    KeySpec{"locks.lockd.user_timeout_ms", kInt, "20000", 0, 3600000, "",
            "lockd backend: data the server leaves unacknowledged this long ends the connection, "
            "and a silent server is dropped at the first keepalive probe past it (0: the "
            "kernel's default)"},
    // data
    KeySpec{"data.backend", kString, "files", 0, 0, "files|postgres",
            "where the data lives: files under data.dir (one host) or PostgreSQL (many hosts)"},
    KeySpec{"data.dir", kString, "var/data", 0, 0, "", "where apps keep their files"},
    KeySpec{"data.fsync", kString, "always", 0, 0, "always|never",
            "fsync every commit (crash-durable) or leave it to the kernel"},
    KeySpec{"data.syncfs_min_files", kInt, "3", 0, 1000000, "",
            "with data.fsync = always, a group commit round with this many logs or more to flush "
            "makes one syncfs of data.dir's filesystem (one flush for all) instead of an fsync "
            "each, while data.syncfs_max_dirty_kb allows. 0 = always an fsync each"},
    KeySpec{"data.syncfs_max_dirty_kb", kInt, "4096", 0, 1000000000, "",
            "a round uses its syncfs only while the kernel holds at most this many KiB of dirty "
            "data (/proc/meminfo Dirty + Writeback, all filesystems): a syncfs also writes what "
            "other programs left dirty on data.dir's filesystem. 0 = no limit (data.dir on a "
            "filesystem of its own)"},
    KeySpec{"data.journal", kBool, "true", 0, 0, "",
            "with data.fsync = always, a group commit round writes what the logs gained to one "
            "journal file per process and flushes that (one fdatasync for any number of logs); "
            "replayed at start after a power cut. false = flush the logs themselves"},
    KeySpec{"data.journal_kb", kInt, "8192", 64, 1048576, "",
            "size of each process's journal (data.dir/.kagi-journal/<n>); when full, one syncfs "
            "lets it start over"},
    KeySpec{"data.adopt_lock_domain", kBool, "false", 0, 0, "",
            "take over a data.dir recorded for another lock domain (a deliberate move, every "
            "other writer stopped); otherwise such a folder is refused at start"},
    KeySpec{"data.group_readable", kBool, "false", 0, 0, "",
            "new data files 0640 and folders 0750 (group may read) instead of 0600 / 0700"},
    KeySpec{"data.postgres.dsn", kString, "", 0, 0, "",
            "postgres data: libpq connection string or URI; empty = locks.postgres.dsn"},
    KeySpec{"data.postgres.pool", kInt, "16", 1, 10000, "",
            "postgres data: most connections per process for calls not made on a lock's "
            "connection"},
    // sessions and offline locks
    KeySpec{"session.idle_s", kInt, "3600", 1, 31536000, "",
            "a session unseen for this long is gone (its cookie no longer loads it)"},
    KeySpec{"session.max_sessions", kInt, "100000", 1, kMaxInt, "",
            "most sessions kept; a new one beyond evicts the least recently seen"},
    KeySpec{"session.max_offline_locks", kInt, "16", 1, 100000, "",
            "most offline locks one session holds at once; more are refused"},
    KeySpec{"offline.max_ttl_s", kInt, "3600", 1, 31536000, "",
            "longest an offline lock is granted for at a time (longer requests are clamped)"},
    KeySpec{"offline.sweep_interval_s", kInt, "60", 1, 86400, "",
            "how often expired offline locks are removed (they are ignored at once)"},
    // templates, logging, security
    KeySpec{"templates.dir", kString, "templates", 0, 0, "",
            "folder with the HTML templates (errors/, bbs/, chat/, admin/)"},
    KeySpec{"templates.fallback_dir", kString, "", 0, 0, "",
            "a second folder for templates templates.dir lacks: kagi's installed ones "
            "(share/kagi/templates: error pages) for a site of your own; empty = none"},
    KeySpec{"log.level", kString, "info", 0, 0, "debug|info|warn|error", "least log level"},
    KeySpec{"log.access", kBool, "true", 0, 0, "", "one access log line per request"},
    KeySpec{"security.csp", kString,
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
            "frame-ancestors 'none'; base-uri 'self'; form-action 'self'",
            0, 0, "", "Content-Security-Policy sent with every response"},
    KeySpec{"security.secret_file", kString, "", 0, 0, "",
            "server secret (CSRF tokens, BBS client tags), made 0600 on first start; empty = "
            "secret.key in data.dir"},
};

struct FrameworkSection {
  std::string_view name;
  std::string_view doc;
};
constexpr std::array kFrameworkSections{
    FrameworkSection{"server", "the front ends: threads, listen address, connections"},
    FrameworkSection{"limits", "bounds on what a client may send"},
    FrameworkSection{"locks", "the lock service"},
    FrameworkSection{"data", "the data directory"},
    FrameworkSection{"session", "server-side sessions (ctx.session)"},
    FrameworkSection{"offline", "offline locks that span several requests (ctx.offline)"},
    FrameworkSection{"templates", "HTML templates"},
    FrameworkSection{"log", "logging"},
    FrameworkSection{"security", "response headers and the server secret"},
};

std::string_view section_of(std::string_view key) { return key.substr(0, key.find('.')); }

std::string type_text(const KeySpec& spec) {
  switch (spec.type) {
    case KeyType::kBool:
      return "true|false";
    case KeyType::kInt:
      return "integer " + std::to_string(spec.min) + ".." + std::to_string(spec.max);
    case KeyType::kString:
      return spec.choices.empty() ? "string" : std::string(spec.choices);
    case KeyType::kStringList:
      return "list of strings";
  }
  return "?";
}

// The default as it would be written in a TOML file.
std::string toml_default(const KeySpec& spec) {
  auto quote = [](std::string_view text) { return "\"" + std::string(text) + "\""; };
  if (spec.type == KeyType::kString) return quote(spec.default_text);
  if (spec.type != KeyType::kStringList) return std::string(spec.default_text);
  std::string out = "[";
  std::string_view rest = spec.default_text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    out += (out.size() > 1 ? ", " : "") + quote(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out + "]";
}

}  // namespace

Schema Schema::framework() {
  Schema schema;
  for (const auto& section : kFrameworkSections) {
    schema.sections_.push_back({std::string(section.name), std::string(section.doc)});
  }
  schema.keys_.assign(kKeys.begin(), kKeys.end());
  return schema;
}

void Schema::add_section(std::string_view section, std::span<const KeySpec> keys,
                         std::string_view doc) {
  if (section.empty() || section.find('.') != std::string_view::npos) {
    throw std::logic_error("config section name '" + std::string(section) +
                           "' must be one word without dots");
  }
  if (has_section(section)) {
    throw std::logic_error("config section [" + std::string(section) +
                           "] is declared twice: two apps cannot share a section");
  }
  for (const auto& spec : keys) {
    if (section_of(spec.key) != section || spec.key.size() <= section.size() + 1) {
      throw std::logic_error("config key '" + std::string(spec.key) + "' is not of the form " +
                             std::string(section) + ".<name>");
    }
    if (find(spec.key)) {
      throw std::logic_error("config key '" + std::string(spec.key) + "' is declared twice");
    }
  }
  sections_.push_back({std::string(section), std::string(doc)});
  keys_.insert(keys_.end(), keys.begin(), keys.end());
}

const KeySpec* Schema::find(std::string_view key) const {
  for (const auto& spec : keys_) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

bool Schema::has_section(std::string_view section) const {
  for (const auto& s : sections_) {
    if (s.name == section) return true;
  }
  return false;
}

std::string Schema::describe() const {
  std::string out;
  for (const auto& section : sections_) {
    if (!out.empty()) out += "\n";
    if (!section.doc.empty()) out += "# " + section.doc + "\n";
    out += "[" + section.name + "]\n";
    for (const auto& spec : keys_) {
      if (section_of(spec.key) != section.name) continue;
      out += std::string(spec.key.substr(section.name.size() + 1)) + " = " + toml_default(spec) +
             "  # " + type_text(spec) + ": " + std::string(spec.doc) + "\n";
    }
  }
  return out;
}

}  // namespace kagi::config
