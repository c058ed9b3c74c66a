// util/bounded_pool.hpp — a bounded pool of client connections for one process, whatever the
// connection (pg/pool.hpp for PostgreSQL, the lockd lock backend for kagi-lockd).
//
//   util::BoundedPool<Conn> pool({.max = 16}, open, exhausted);
//   auto conn = pool.take(deadline, ec, &why);   // an idle one, a new one, or wait for one
//   ...
//   pool.give_back(std::move(conn));             // a broken one is closed, freeing a place
//
// At most `max` connections exist at once (idle, in use, or being opened). take() waits for a
// free place until its deadline, then answers what `exhausted` says. An idle connection the
// server closed meanwhile is noticed when it is taken (if it sat idle longer than
// `check_idle_after`) and replaced. After a failed open, further opens fail at once with the
// same reason for `retry_after_failure`, so a server that is down costs one attempt per
// interval instead of one per request; a success clears it. Thread-safe.
//
// `Conn` has `bool broken() const`, `bool closed_while_idle()` (a look without waiting) and a
// `std::chrono::steady_clock::time_point idle_since` the pool sets.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::util {

struct BoundedPoolOptions {
  size_t max = 16;
  std::chrono::milliseconds retry_after_failure{250};
  std::chrono::milliseconds check_idle_after{1000};
  // A connection given back broken closes the idle ones too: they most likely broke the same
  // way (a server restart).
  bool broken_closes_idle = false;
};

template <typename Conn>
class BoundedPool {
 public:
  using Clock = std::chrono::steady_clock;
  // Opens a new connection before the deadline; null with the error and the reason if not.
  using Open =
      std::function<std::unique_ptr<Conn>(Clock::time_point, std::error_code&, std::string*)>;
  // The error, and its reason, of a take() that found every place in use until its deadline.
  using Exhausted = std::function<std::error_code(std::string*)>;

  BoundedPool(BoundedPoolOptions options, Open open, Exhausted exhausted)
      : options_(options), open_fn_(std::move(open)), exhausted_(std::move(exhausted)) {}
  BoundedPool(const BoundedPool&) = delete;
  BoundedPool& operator=(const BoundedPool&) = delete;

  std::unique_ptr<Conn> take(Clock::time_point deadline, std::error_code& ec, std::string* why)
      KAGI_EXCLUDES(mu_) {
    std::vector<std::unique_ptr<Conn>> stale;  // closed after the mutex is let go
    {
      MutexLock lock(mu_);
      for (;;) {
        while (!idle_.empty()) {
          std::unique_ptr<Conn> conn = std::move(idle_.back());
          idle_.pop_back();
          if (Clock::now() - conn->idle_since < options_.check_idle_after ||
              !conn->closed_while_idle()) {
            ec.clear();
            return conn;
          }
          --open_;  // closed by the server meanwhile: drop it and look again
          stale.push_back(std::move(conn));
        }
        if (open_ < options_.max) {
          if (Clock::now() < failed_until_) {
            ec = failed_ec_;
            if (why) *why = failed_why_ + " (not retried for another moment)";
            return nullptr;
          }
          ++open_;  // our place; the open runs without the mutex
          break;
        }
        if (freed_.wait_until(mu_, deadline) == std::cv_status::timeout && idle_.empty() &&
            open_ >= options_.max) {
          ec = exhausted_(why);
          return nullptr;
        }
      }
    }
    stale.clear();
    std::string reason;
    auto conn = open_fn_(deadline, ec, &reason);
    MutexLock lock(mu_);
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

  // Back for the next take(); a broken one is closed instead.
  void give_back(std::unique_ptr<Conn> conn) KAGI_EXCLUDES(mu_) {
    std::vector<std::unique_ptr<Conn>> closing;  // closed after the mutex is let go
    {
      MutexLock lock(mu_);
      if (!conn->broken()) {
        conn->idle_since = Clock::now();
        idle_.push_back(std::move(conn));
      } else {
        --open_;
        closing.push_back(std::move(conn));
        if (options_.broken_closes_idle) {
          open_ -= idle_.size();
          for (auto& c : idle_) closing.push_back(std::move(c));
          idle_.clear();
        }
      }
    }
    freed_.notify_all();
  }

  // Closes a taken connection that must not be used again, freeing its place.
  void discard(std::unique_ptr<Conn> conn) KAGI_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      --open_;
    }
    freed_.notify_one();
    conn.reset();  // closed without the mutex
  }

  size_t max() const { return options_.max; }
  size_t open_connections() const KAGI_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return open_;
  }
  size_t idle_connections() const KAGI_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return idle_.size();
  }

 private:
  const BoundedPoolOptions options_;
  const Open open_fn_;
  const Exhausted exhausted_;
  mutable Mutex mu_;
  CondVar freed_;
  std::vector<std::unique_ptr<Conn>> idle_ KAGI_GUARDED_BY(mu_);
  size_t open_ KAGI_GUARDED_BY(mu_) = 0;  // idle + taken + being opened
  Clock::time_point failed_until_ KAGI_GUARDED_BY(mu_);
  std::error_code failed_ec_ KAGI_GUARDED_BY(mu_);
  std::string failed_why_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::util
