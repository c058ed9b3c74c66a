// lock/detail/lockd_client.hpp — the client side of kagi-lockd's line protocol
// (docs/LOCKD.md) for the lockd backend and the admin page: one connection whose every wait
// has a deadline, and a bounded pool of them.
//
//   auto conn = LockdConnection::open(target, deadline, ec, &why);
//   conn->send("LOCK bbs/3 2500\n", deadline, &why);
//   std::string answer;
//   conn->read_line(answer, deadline + grace, &why);     // "ok 1732..." or "busy"
//
// A non-blocking socket polled with the time left, like pg/connection.hpp: connecting,
// sending and reading never wait past their deadline. A connection that fails or misses a
// deadline is broken for good (the server releases everything it held when it sees the
// close). Not thread-safe; the pool is.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/lock/options.hpp>
#include <kagi/util/bounded_pool.hpp>
#include <kagi/util/endpoint.hpp>

namespace kagi::lock::detail {

// kagi-lockd's default limits (lockd.max_keys_per_connection, lockd.max_line_bytes). A command
// beyond them is answered with an error and the connection closed, which releases every lock
// on it; the lockd backend stays within them by itself.
inline constexpr size_t kLockdMaxKeys = 64;
inline constexpr size_t kLockdMaxLineBytes = 8192;

// Where and how to connect: parsed once from LockdOptions (make_lockd_target throws
// std::invalid_argument for a bad address or an unreadable secret file).
struct LockdTarget {
  std::string address;
  util::Endpoint endpoint;
  std::string secret;  // sent as AUTH on every new connection when not empty
  LockdOptions options;
};
LockdTarget make_lockd_target(const LockdOptions& options);

class LockdConnection {
 public:
  // Connects (and authenticates, with a secret) before `deadline`. Null on failure, with
  // Errc::kUnavailable or kTimeout in `ec` and the reason in `why`.
  static std::unique_ptr<LockdConnection> open(const LockdTarget& target,
                                               Clock::time_point deadline, std::error_code& ec,
                                               std::string* why);
  ~LockdConnection();
  LockdConnection(const LockdConnection&) = delete;
  LockdConnection& operator=(const LockdConnection&) = delete;

  // Sends all of `bytes` (one or more lines) before `deadline`.
  std::error_code send(std::string_view bytes, Clock::time_point deadline, std::string* why);
  // The next answer line, without its '\n'. An "error ..." line is returned as it is (the
  // server closes after it: the connection is then broken).
  std::error_code read_line(std::string& line, Clock::time_point deadline, std::string* why);

  bool broken() const { return broken_; }
  // True if the server closed this idle connection meanwhile (its idle timeout, a restart):
  // looked at without waiting. A connection found closed is broken.
  bool closed_while_idle();

  Clock::time_point idle_since;  // when the pool last took it back

 private:
  explicit LockdConnection(int fd) : fd_(fd) {}
  std::error_code fail(Errc errc, std::string* why, const std::string& what);
  bool wait_for(short events, Clock::time_point deadline);

  int fd_;
  bool broken_ = false;
  std::string in_;  // bytes read past the last line returned
};

// The process's connections to kagi-lockd (util/bounded_pool.hpp): at most LockdOptions::pool;
// take() waits for a free place until its deadline; after a failed connect, further connects
// fail at once with the same reason for 250 ms. Thread-safe.
class LockdPool {
 public:
  explicit LockdPool(LockdTarget target);

  std::unique_ptr<LockdConnection> take(Clock::time_point deadline, std::error_code& ec,
                                        std::string* why) {
    return pool_.take(deadline, ec, why);
  }
  // Back for the next take(), or closed if broken.
  void give_back(std::unique_ptr<LockdConnection> conn) { pool_.give_back(std::move(conn)); }
  // Closed (the server then releases what it holds), freeing its place.
  void discard(std::unique_ptr<LockdConnection> conn) { pool_.discard(std::move(conn)); }

  const LockdTarget& target() const { return target_; }

 private:
  const LockdTarget target_;
  util::BoundedPool<LockdConnection> pool_;
};

}  // namespace kagi::lock::detail
