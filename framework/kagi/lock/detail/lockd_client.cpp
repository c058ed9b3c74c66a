#include <kagi/lock/detail/lockd_client.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <kagi/util/utf8.hpp>
#include <kagi/util/wait_fd.hpp>

namespace kagi::lock::detail {
namespace {

constexpr std::chrono::milliseconds kRetryAfterFailure{250};
constexpr std::chrono::milliseconds kCheckIdleAfter{1000};
constexpr size_t kMaxAnswerLine = 1 << 20;  // a STATUS line of a key with many waiters

}  // namespace

LockdTarget make_lockd_target(const LockdOptions& options) {
  LockdTarget t;
  t.address = options.address;
  t.options = options;
  std::string why;
  if (!util::parse_endpoint(options.address, t.endpoint, &why)) {
    throw std::invalid_argument("locks.lockd.address: " + why);
  }
  if (!options.secret_file.empty()) {
    std::ifstream in(options.secret_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      throw std::invalid_argument("locks.lockd.secret_file '" + options.secret_file +
                                  "' cannot be read (kagi's user must be able to read it)");
    }
    t.secret = text.str();
    while (!t.secret.empty() && (t.secret.back() == '\n' || t.secret.back() == '\r')) {
      t.secret.pop_back();
    }
    // AUTH carries it on one line (kagi-lockd refuses the same secrets at its start).
    const bool control = std::any_of(t.secret.begin(), t.secret.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (t.secret.empty() || t.secret.size() > 512 || control || !util::valid_utf8(t.secret)) {
      throw std::invalid_argument("locks.lockd.secret_file '" + options.secret_file +
                                  "' must hold one line of 1 to 512 bytes of UTF-8 text without "
                                  "tabs or other control characters (AUTH sends it on one line)");
    }
  }
  if (options.pool == 0) throw std::invalid_argument("locks.lockd.pool must be at least 1");
  return t;
}

std::unique_ptr<LockdConnection> LockdConnection::open(const LockdTarget& target,
                                                       Clock::time_point deadline,
                                                       std::error_code& ec, std::string* why) {
  const int fd = ::socket(target.endpoint.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = make_error_code(Errc::kUnavailable);
    if (why) *why = "kagi-lockd " + target.address + ": socket: " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<LockdConnection> conn(new LockdConnection(fd));
  if (!target.endpoint.is_unix) {
    // A lock server that vanished must not leave a request waiting on a dead socket: the same
    // dead-peer bounds as the server keeps on its side.
    const LockdOptions& o = target.options;
    const int one = 1;
    const unsigned user_timeout = static_cast<unsigned>(o.user_timeout_ms);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &o.keepalive_idle_s, sizeof(int));
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &o.keepalive_interval_s, sizeof(int));
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &o.keepalive_count, sizeof(int));
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  }
  const std::string where = "kagi-lockd " + target.address;
  if (::connect(fd, target.endpoint.sockaddr_ptr(), target.endpoint.sockaddr_len()) != 0) {
    // Only EINPROGRESS is a connection under way. EAGAIN is not: on a unix socket the server's
    // listen backlog is full, on TCP no local port is free.
    if (errno == EAGAIN) {
      ec = conn->fail(Errc::kUnavailable, why,
                      where + ": connect: " +
                          (target.endpoint.is_unix
                               ? "the server's listen backlog is full (it is overloaded, or "
                                 "stopped accepting)"
                               : "no local port is free for a new connection"));
      return nullptr;
    }
    if (errno != EINPROGRESS) {
      ec = conn->fail(Errc::kUnavailable, why, where + ": connect: " + std::strerror(errno));
      return nullptr;
    }
    if (!conn->wait_for(POLLOUT, deadline)) {
      ec = conn->fail(Errc::kTimeout, why, where + ": no connection before the deadline");
      return nullptr;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      ec = conn->fail(Errc::kUnavailable, why, where + ": connect: " + std::strerror(err));
      return nullptr;
    }
  }
  if (!target.secret.empty()) {
    std::string answer;
    ec = conn->send("AUTH " + target.secret + "\n", deadline, why);
    if (!ec) ec = conn->read_line(answer, deadline, why);
    if (!ec && answer != "ok") {
      ec = conn->fail(Errc::kUnavailable, why, where + ": AUTH refused: " + answer);
    }
    if (ec) return nullptr;
  }
  ec.clear();
  return conn;
}

LockdConnection::~LockdConnection() { ::close(fd_); }

std::error_code LockdConnection::fail(Errc errc, std::string* why, const std::string& what) {
  broken_ = true;
  if (why) *why = what;
  return make_error_code(errc);
}

bool LockdConnection::wait_for(short events, Clock::time_point deadline) {
  return util::wait_fd(fd_, events, deadline);
}

std::error_code LockdConnection::send(std::string_view bytes, Clock::time_point deadline,
                                      std::string* why) {
  if (broken_) return fail(Errc::kUnavailable, why, "kagi-lockd: the connection is broken");
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(POLLOUT, deadline)) {
        return fail(Errc::kTimeout, why, "kagi-lockd: sending: no room before the deadline");
      }
      continue;
    }
    return fail(Errc::kUnavailable, why,
                std::string("kagi-lockd: sending: ") + std::strerror(errno));
  }
  return {};
}

std::error_code LockdConnection::read_line(std::string& line, Clock::time_point deadline,
                                           std::string* why) {
  if (broken_) return fail(Errc::kUnavailable, why, "kagi-lockd: the connection is broken");
  for (;;) {
    if (const size_t nl = in_.find('\n'); nl != std::string::npos) {
      line.assign(in_, 0, nl);
      in_.erase(0, nl + 1);
      if (line.rfind("error ", 0) == 0) broken_ = true;  // the server closes after it
      return {};
    }
    if (in_.size() > kMaxAnswerLine) {
      return fail(Errc::kBackend, why, "kagi-lockd: an answer line longer than 1 MiB");
    }
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0)
      return fail(Errc::kUnavailable, why, "kagi-lockd: the server closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(POLLIN, deadline)) {
        return fail(Errc::kTimeout, why, "kagi-lockd: no answer before the deadline");
      }
      continue;
    }
    return fail(Errc::kUnavailable, why,
                std::string("kagi-lockd: reading: ") + std::strerror(errno));
  }
}

bool LockdConnection::closed_while_idle() {
  if (broken_) return true;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) == 0) return false;
  // An idle connection is sent nothing unless the server is done with it ("error idle
  // timeout" and a close, or a close at its stop).
  return broken_ = true;
}

LockdPool::LockdPool(LockdTarget target)
    : target_(std::move(target)),
      pool_(
          {.max = target_.options.pool,
           .retry_after_failure = kRetryAfterFailure,
           .check_idle_after = kCheckIdleAfter},
          [this](Clock::time_point deadline, std::error_code& ec, std::string* why) {
            return LockdConnection::open(target_, deadline, ec, why);
          },
          [this](std::string* why) {
            if (why) {
              *why = "all " + std::to_string(target_.options.pool) +
                     " kagi-lockd connections of this process are in use (raise "
                     "locks.lockd.pool, or serve with fewer threads)";
            }
            return make_error_code(Errc::kUnavailable);
          }) {}

}  // namespace kagi::lock::detail
