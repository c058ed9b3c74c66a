#include <kagi/pg/pool.hpp>

#include <kagi/pg/errors.hpp>

namespace kagi::pg {

Pool::Pool(PoolOptions options) : options_(std::move(options)) {}

Pool::~Pool() = default;

std::unique_ptr<Connection> Pool::take(Clock::time_point deadline, std::error_code& ec,
                                       std::string* why) {
  {
    util::MutexLock lock(mu_);
    for (;;) {
      while (!idle_.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle_.back());
        idle_.pop_back();
        if (Clock::now() - conn->idle_since < options_.check_idle_after ||
            !conn->closed_while_idle()) {
          ec.clear();
          return conn;
        }
        --open_;  // closed by the server meanwhile: drop it and look again
      }
      if (open_ < options_.max) {
        if (Clock::now() < failed_until_) {
          ec = failed_ec_;
          if (why) *why = failed_why_ + " (not retried for another moment)";
          return nullptr;
        }
        ++open_;  // our place; the connect runs without the mutex
        break;
      }
      if (freed_.wait_until(mu_, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_ >= options_.max) {
        ec = make_error_code(Errc::kPoolExhausted);
        if (why) {
          *why = "all " + std::to_string(options_.max) +
                 " PostgreSQL connections of this process are in use (raise the pool size, "
                 "or serve with fewer threads)";
        }
        return nullptr;
      }
    }
  }
  std::string reason;
  auto conn = Connection::open(options_.connect, deadline, ec, &reason);
  if (conn && options_.on_connect) options_.on_connect(*conn, deadline);
  if (conn && conn->broken()) {
    conn.reset();
    ec = make_error_code(Errc::kUnavailable);
    reason = "PostgreSQL: the connection broke while it was being prepared";
  }
  util::MutexLock lock(mu_);
  if (!conn) {
    --open_;
    failed_until_ = Clock::now() + options_.retry_after_failure;
    failed_ec_ = ec;
    failed_why_ = reason;
    freed_.notify_one();
    if (why) *why = std::move(reason);
    return nullptr;
  }
  failed_until_ = {};
  return conn;
}

void Pool::give_back(std::unique_ptr<Connection> conn) {
  std::vector<std::unique_ptr<Connection>> closing;  // closed after the mutex is let go
  {
    util::MutexLock lock(mu_);
    if (!conn->broken()) {
      conn->idle_since = Clock::now();
      idle_.push_back(std::move(conn));
    } else {
      --open_;
      open_ -= idle_.size();
      closing.swap(idle_);
    }
  }
  freed_.notify_all();
}

void Pool::discard(std::unique_ptr<Connection> conn) {
  {
    util::MutexLock lock(mu_);
    --open_;
  }
  freed_.notify_one();
  conn.reset();  // closed without the mutex
}

size_t Pool::open_connections() const {
  util::MutexLock lock(mu_);
  return open_;
}

size_t Pool::idle_connections() const {
  util::MutexLock lock(mu_);
  return idle_.size();
}

}  // namespace kagi::pg
