#include <kagi/config/schema.hpp>

#include <array>

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
    KeySpec{"locks.backend", kString, "local", 0, 0, "local", "lock backend"},
    KeySpec{"locks.dir", kString, "var/locks", 0, 0, "",
            "lock files and the status registry (local backend)"},
    KeySpec{"locks.timeout_ms", kInt, "3000", 0, 3600000, "",
            "default bound on every lock wait; reached → 503"},
    KeySpec{"locks.retry_after_s", kInt, "2", 0, 3600, "", "Retry-After sent with a 503 busy page"},
    KeySpec{"locks.order_check", kString, "report", 0, 0, "report|fail",
            "a lock taken out of canonical order: log and count it, or also fail at once"},
    KeySpec{"locks.max_hold_ms", kInt, "60000", 0, 86400000, "",
            "a lock held longer is revoked: released for the next request, the holder's "
            "commits refused (0: never)"},
    // data
    KeySpec{"data.dir", kString, "var/data", 0, 0, "", "where apps keep their files"},
    KeySpec{"data.fsync", kString, "always", 0, 0, "always|never",
            "fsync every commit (crash-durable) or leave it to the kernel"},
    KeySpec{"data.group_readable", kBool, "false", 0, 0, "",
            "new data files 0640 and folders 0750 (group may read) instead of 0600 / 0700"},
    // templates, logging, security
    KeySpec{"templates.dir", kString, "templates", 0, 0, "",
            "folder with the HTML templates (errors/, bbs/, chat/, admin/)"},
    KeySpec{"log.level", kString, "info", 0, 0, "debug|info|warn|error", "least log level"},
    KeySpec{"log.access", kBool, "true", 0, 0, "", "one access log line per request"},
    KeySpec{"security.csp", kString,
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
            "frame-ancestors 'none'; base-uri 'self'; form-action 'self'",
            0, 0, "", "Content-Security-Policy sent with every response"},
    KeySpec{"security.secret_file", kString, "", 0, 0, "",
            "server secret (CSRF tokens, BBS client tags), made 0600 on first start; empty = "
            "secret.key in data.dir"},
    // test hooks: never on in production
    KeySpec{"test.routes", kBool, "false", 0, 0, "",
            "mount /_test/ routes used by the integration tests"},
    // apps
    KeySpec{"bbs.boards", kStringList, "general", 0, 0, "", "board names"},
    KeySpec{"bbs.keep", kInt, "1000", 1, 10000000, "", "posts kept per board"},
    KeySpec{"bbs.page_size", kInt, "20", 1, 1000, "", "posts per page"},
    KeySpec{"bbs.flood_interval_s", kInt, "10", 0, 86400, "",
            "least seconds between posts from one client address (0 = off)"},
    KeySpec{"bbs.max_name_chars", kInt, "64", 1, 10000, "", "longest name"},
    KeySpec{"bbs.max_subject_chars", kInt, "120", 1, 10000, "", "longest subject"},
    KeySpec{"bbs.max_body_chars", kInt, "8000", 1, 1000000, "", "longest post body"},
    KeySpec{"bbs.delete_tries_per_client", kInt, "10", 0, 1000000, "",
            "delete password checks per minute from one client address (0 = no limit); more → 429"},
    KeySpec{"bbs.delete_tries_per_post", kInt, "10", 0, 1000000, "",
            "delete password checks per minute on one post (0 = no limit); more → 429"},
    KeySpec{"chat.rooms", kStringList, "lobby", 0, 0, "", "room names"},
    KeySpec{"chat.keep", kInt, "200", 1, 1000000, "", "messages kept per room"},
    KeySpec{"chat.say_per_minute", kInt, "30", 0, 60000, "",
            "messages one client address may say per minute, host-wide, after its burst; "
            "beyond → 429 (0 = no limit)"},
    KeySpec{"chat.say_burst", kInt, "10", 1, 100000, "",
            "messages one client address may say at once before say_per_minute applies"},
    KeySpec{"chat.max_waiters", kInt, "512", 1, 1000000, "",
            "long-polls parked at once per process (each holds a connection); beyond → 429"},
    KeySpec{"chat.max_waiters_per_client", kInt, "16", 1, 1000000, "",
            "long-polls parked at once per process from one client address; beyond → 429"},
    KeySpec{"admin.htpasswd", kString, "", 0, 0, "",
            "htpasswd file (bcrypt, htpasswd -B) for /admin/; empty = admin routes off"},
    KeySpec{"admin.allow", kStringList, "127.0.0.1,::1", 0, 0, "",
            "client addresses allowed to reach /admin/"},
};

}  // namespace

std::span<const KeySpec> schema() { return kKeys; }

const KeySpec* find_key(std::string_view key) {
  for (const auto& spec : kKeys) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

}  // namespace kagi::config
