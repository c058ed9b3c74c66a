// apps/bbs/throttle.hpp — at most N attempts per key per time window, in a bounded table.
//
// The board uses it for delete passwords: checking one costs ~35 ms of CPU (util/password),
// so unthrottled wrong guesses are both a way to burn the server's CPU and a way to guess a
// post's password. One limiter counts per post, another per client, before any hash is run.
//
// The table lives in this process's memory: each worker process counts on its own, so a
// site with P processes allows up to P times the limit (still a fixed, small bound). It
// holds at most `max_keys` keys: when full, expired windows are dropped first, then the
// oldest one, so a flood of new keys costs memory O(max_keys) and cannot grow it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::apps::bbs {

class AttemptLimiter {
 public:
  // `max_attempts` per `window_s` seconds per key; 0 attempts = no limit.
  AttemptLimiter(int64_t max_attempts, int64_t window_s, size_t max_keys);
  AttemptLimiter(const AttemptLimiter&) = delete;
  AttemptLimiter& operator=(const AttemptLimiter&) = delete;

  // Counts one attempt for `key` at `now_s` (steady seconds). Returns 0 when it may go on,
  // or the seconds until the key's window ends (for Retry-After) when it is over the limit;
  // a refused attempt is not counted.
  int64_t try_attempt(const std::string& key, int64_t now_s) KAGI_EXCLUDES(mu_);

  size_t size() const KAGI_EXCLUDES(mu_);

 private:
  struct Window {
    int64_t start_s = 0;
    int64_t count = 0;
  };
  void make_room(int64_t now_s) KAGI_REQUIRES(mu_);

  const int64_t max_attempts_;
  const int64_t window_s_;
  const size_t max_keys_;
  mutable util::Mutex mu_;
  std::unordered_map<std::string, Window> windows_ KAGI_GUARDED_BY(mu_);
};

// Seconds on a steady clock, for try_attempt().
int64_t steady_now_s();

}  // namespace kagi::apps::bbs
