// tests/unit/store/slow_sync_fs.hpp — the real filesystem with every fsync made slow (so that
// requests pile up behind one flush) and, on demand, held until released (to watch what
// happens while a flush has not completed).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <kagi/store/fs.hpp>

namespace kagi::store::testing {

class SlowSyncFs final : public FileSystem {
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

  int fsync(int fd) override {
    slow_down(fd);
    return real_fs().fsync(fd);
  }
  int syncfs(int fd) override {
    slow_down(fd);
    return real_fs().syncfs(fd);
  }
  int open_at(int d, const char* n, int f, mode_t m) override {
    return real_fs().open_at(d, n, f, m);
  }
  int open_beneath(int d, const char* p, int f) override { return real_fs().open_beneath(d, p, f); }
  ssize_t write(int fd, const void* b, size_t n) override { return real_fs().write(fd, b, n); }
  ssize_t pwrite(int fd, const void* b, size_t n, off_t o) override {
    return real_fs().pwrite(fd, b, n, o);
  }
  ssize_t pread(int fd, void* b, size_t n, off_t o) override {
    return real_fs().pread(fd, b, n, o);
  }
  int rename_at(int a, const char* b, int c, const char* d) override {
    return real_fs().rename_at(a, b, c, d);
  }
  int unlink_at(int d, const char* n) override { return real_fs().unlink_at(d, n); }
  int mkdir_at(int d, const char* n, mode_t m) override { return real_fs().mkdir_at(d, n, m); }
  int ftruncate(int fd, off_t l) override { return real_fs().ftruncate(fd, l); }
  int fstat(int fd, struct stat* st) override { return real_fs().fstat(fd, st); }
  int fstat_birth(int fd, struct stat* st, int64_t* b) override {
    return real_fs().fstat_birth(fd, st, b);
  }
  int close(int fd) override { return real_fs().close(fd); }

 private:
  // Each flush (an fsync or a syncfs through a file of the filesystem) takes 3 ms, and waits
  // first while held (for a file whose path ends with the held suffix).
  void slow_down(int fd) {
    if (suffix_matches(fd)) {
      std::unique_lock lock(mu_);
      ++waiting_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !held_; });
      --waiting_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    ++fsyncs_;
  }
  bool suffix_matches(int fd) {
    std::string suffix;
    {
      std::lock_guard lock(mu_);
      suffix = suffix_;
    }
    if (suffix.empty()) return true;
    char target[4096];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
    return n >= 0 && std::string_view(target, static_cast<size_t>(n)).ends_with(suffix);
  }

  std::mutex mu_;
  std::string suffix_;
  std::condition_variable cv_;
  bool held_ = false;
  int waiting_ = 0;
  std::atomic<int> fsyncs_{0};
};

}  // namespace kagi::store::testing
