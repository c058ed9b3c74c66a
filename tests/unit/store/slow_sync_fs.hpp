// tests/unit/store/slow_sync_fs.hpp — the real filesystem with every fsync made slow (so that
// requests pile up behind one flush) and, on demand, held until released (to watch what
// happens while a flush has not completed), and on demand failed once (fail_next_held).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "forwarding_fs.hpp"

namespace kagi::store::testing {

class SlowSyncFs final : public ForwardingFs {
 public:
  // From now on fsyncs wait for release(): all of them, or only those of files whose path
  // ends with `suffix` (".log": the logs, not the whole-file commits beside them).
  void hold(std::string suffix = "") {
    std::lock_guard lock(mu_);
    held_ = true;
    suffix_ = std::move(suffix);
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  // Waits until an fsync is held (a flush has started).
  bool wait_for_held_sync() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }
  int fsyncs() const { return fsyncs_.load(); }
  // The next fsync of a held file fails with `error` (an errno), and the ones after it succeed:
  // the kernel reports a write-back error once.
  void fail_next_held(int error) {
    std::lock_guard lock(mu_);
    fail_next_ = error;
  }

  int fsync(int fd) override {
    if (int error = slow_down(fd)) return -error;
    return real_fs().fsync(fd);
  }
  int syncfs(int fd) override {
    if (int error = slow_down(fd)) return -error;
    return real_fs().syncfs(fd);
  }

 private:
  // Each flush (an fsync or a syncfs through a file of the filesystem) takes 3 ms, and waits
  // first while held (for a file whose path ends with the held suffix). Returns the error the
  // flush is to fail with (fail_next_held), or 0.
  int slow_down(int fd) {
    int error = 0;
    if (suffix_matches(fd)) {
      std::unique_lock lock(mu_);
      ++waiting_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !held_; });
      --waiting_;
      std::swap(error, fail_next_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    ++fsyncs_;
    return error;
  }
  bool suffix_matches(int fd) {
    std::string suffix;
    {
      std::lock_guard lock(mu_);
      suffix = suffix_;
    }
    if (suffix.empty()) return true;
    return path_of_fd(fd).ends_with(suffix);
  }

  std::mutex mu_;
  std::string suffix_;
  std::condition_variable cv_;
  bool held_ = false;
  int waiting_ = 0;
  int fail_next_ = 0;
  std::atomic<int> fsyncs_{0};
};

}  // namespace kagi::store::testing
