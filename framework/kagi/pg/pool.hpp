// pg/pool.hpp — a bounded pool of PostgreSQL connections for one process.
//
//   pg::Pool pool({.connect = {.dsn = "host=db1 dbname=site"}, .max = 16});
//   auto conn = pool.take(deadline, ec, &why);   // idle one, new one, or wait for one
//   ...
//   pool.give_back(std::move(conn));             // broken ones are closed, freeing a place
//
// The pooling is util/bounded_pool.hpp's; this adds PostgreSQL's connect and on_connect hook.
// At most `max` connections exist at once (idle, in use, or being opened). take() waits for a
// free place until its deadline (Errc::kPoolExhausted then). An idle connection the server
// closed meanwhile (restart, terminated) is noticed when it is taken and replaced. After a
// failed connect, further connects fail at once with the same reason for
// `retry_after_failure`, so a down server costs one connect attempt per interval instead of
// one per request; a success clears it. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <kagi/pg/connection.hpp>
#include <kagi/pg/options.hpp>
#include <kagi/util/bounded_pool.hpp>

namespace kagi::pg {

struct PoolOptions {
  ConnectOptions connect;
  size_t max = 16;
  std::chrono::milliseconds retry_after_failure{250};
  std::chrono::milliseconds check_idle_after{1000};
  // Run once on each new connection before it is handed out (e.g. create a table). A failure
  // is logged by the caller's hook; the connection is used all the same unless it broke.
  std::function<void(Connection&, Clock::time_point deadline)> on_connect;
};

class Pool {
 public:
  explicit Pool(PoolOptions options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A connection that is not broken, or null with Errc::kPoolExhausted / kUnavailable /
  // kTimeout / kBadOptions in `ec` and the reason in `why`.
  std::unique_ptr<Connection> take(Clock::time_point deadline, std::error_code& ec,
                                   std::string* why) {
    return pool_.take(deadline, ec, why);
  }
  // Returns a taken connection for the next take(). A broken one is closed instead and the
  // idle connections with it (they most likely broke the same way, e.g. a server restart).
  void give_back(std::unique_ptr<Connection> conn) { pool_.give_back(std::move(conn)); }
  // Closes a taken connection that works but must not be used again (its session holds state
  // that only its end clears), freeing its place.
  void discard(std::unique_ptr<Connection> conn) { pool_.discard(std::move(conn)); }

  size_t max() const { return options_.max; }
  size_t open_connections() const { return pool_.open_connections(); }
  size_t idle_connections() const { return pool_.idle_connections(); }
  const PoolOptions& options() const { return options_; }

 private:
  const PoolOptions options_;
  util::BoundedPool<Connection> pool_;
};

}  // namespace kagi::pg
