#include "bbs/throttle.hpp"

#include <chrono>

namespace kagi::apps::bbs {

AttemptLimiter::AttemptLimiter(int64_t max_attempts, int64_t window_s, size_t max_keys)
    : max_attempts_(max_attempts), window_s_(window_s), max_keys_(max_keys) {}

int64_t AttemptLimiter::try_attempt(const std::string& key, int64_t now_s) {
  if (max_attempts_ <= 0) return 0;
  util::MutexLock lock(mu_);
  auto it = windows_.find(key);
  if (it == windows_.end()) {
    if (windows_.size() >= max_keys_) make_room(now_s);
    it = windows_.emplace(key, Window{now_s, 0}).first;
  } else if (now_s - it->second.start_s >= window_s_) {
    it->second = Window{now_s, 0};
  }
  Window& w = it->second;
  if (w.count >= max_attempts_) return std::max<int64_t>(1, w.start_s + window_s_ - now_s);
  ++w.count;
  return 0;
}

void AttemptLimiter::make_room(int64_t now_s) {
  std::erase_if(windows_, [&](const auto& kv) { return now_s - kv.second.start_s >= window_s_; });
  if (windows_.size() < max_keys_) return;
  // All windows are live: drop the one that ends first (it has the least left to protect).
  auto oldest = windows_.begin();
  for (auto it = windows_.begin(); it != windows_.end(); ++it) {
    if (it->second.start_s < oldest->second.start_s) oldest = it;
  }
  windows_.erase(oldest);
}

size_t AttemptLimiter::size() const {
  util::MutexLock lock(mu_);
  return windows_.size();
}

int64_t steady_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kagi::apps::bbs
