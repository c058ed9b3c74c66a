// tests/unit/store/power_cut_fs.hpp — a FileSystem that can lose power.
//
// Every call goes to the real filesystem, and each fsync first copies the file as it stands at
// the call (what a real fsync promises: the writes made before it); a syncfs copies every file
// of that filesystem opened through here. After cut_after(n), the nth
// call from then and every later one fail with EIO, as on a machine that died. durable() then
// gives each file's bytes as of its last completed fsync: what a power cut would have kept.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <kagi/store/fs.hpp>
#include "forwarding_fs.hpp"

namespace kagi::store::testing {

class PowerCutFs final : public FileSystem {
 public:
  // The nth call from now fails, and so does everything after it. 0: never.
  void cut_after(uint64_t n) {
    std::lock_guard lock(mu_);
    cut_at_ = n == 0 ? 0 : calls_ + n;
  }
  bool cut() const {
    std::lock_guard lock(mu_);
    return dead_;
  }
  // The bytes the last completed fsync of (dev, ino) kept; nullopt if it was never synced.
  std::optional<std::string> durable(const struct stat& st) const {
    std::lock_guard lock(mu_);
    auto it = synced_.find({st.st_dev, st.st_ino});
    if (it == synced_.end()) return std::nullopt;
    return it->second.first;
  }
  uint64_t fsyncs() const {
    std::lock_guard lock(mu_);
    return fsyncs_;
  }
  // What dirty_bytes() answers: as if the kernel held that much dirty data (-errno: does not
  // say). 0 until set: nothing dirty but what the tests write.
  void set_dirty_bytes(int64_t bytes) {
    std::lock_guard lock(mu_);
    dirty_bytes_ = bytes;
  }
  int64_t dirty_bytes() override {
    std::lock_guard lock(mu_);
    return dirty_bytes_;
  }

  int open_at(int dir_fd, const char* name, int flags, mode_t mode) override {
    if (down()) return -EIO;
    const int fd = real_fs().open_at(dir_fd, name, flags, mode);
    if (fd >= 0) {
      // By path: a syncfs must not touch descriptors other threads may be closing.
      std::string path = path_of_fd(fd);
      std::lock_guard lock(mu_);
      if (!path.empty()) opened_.insert(std::move(path));
    }
    return fd;
  }
  ssize_t write(int fd, const void* data, size_t size) override {
    if (down()) return -EIO;
    return real_fs().write(fd, data, size);
  }
  ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) override {
    if (down()) return -EIO;
    return real_fs().pwrite(fd, data, size, offset);
  }
  ssize_t pread(int fd, void* buf, size_t size, off_t offset) override {
    if (down()) return -EIO;
    return real_fs().pread(fd, buf, size, offset);
  }
  int fsync(int fd) override {
    struct stat st {};
    if (real_fs().fstat(fd, &st) < 0) return -EBADF;
    return flush({fd}, [&] { return real_fs().fsync(fd); });
  }
  // Keeps every file of that filesystem opened through here (those the flushes may cover), as
  // it stands at the call: each is opened again by its path, so the copy touches no descriptor
  // of another thread.
  int syncfs(int fd) override {
    struct stat target {};
    if (real_fs().fstat(fd, &target) < 0) return -EBADF;
    std::vector<std::string> paths;
    {
      std::lock_guard lock(mu_);
      paths.assign(opened_.begin(), opened_.end());
    }
    std::vector<int> own;
    for (const std::string& path : paths) {
      const int copy_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      struct stat st {};
      if (copy_fd < 0) continue;
      if (::fstat(copy_fd, &st) == 0 && st.st_dev == target.st_dev) {
        own.push_back(copy_fd);
      } else {
        ::close(copy_fd);
      }
    }
    const int r = flush(own, [&] { return real_fs().syncfs(fd); });
    for (int copy_fd : own) ::close(copy_fd);
    return r;
  }
  int wait_writeback(int fd) override {
    if (down()) return -EIO;
    return real_fs().wait_writeback(fd);
  }
  int rename_at(int old_dir, const char* old_name, int new_dir, const char* new_name) override {
    if (down()) return -EIO;
    return real_fs().rename_at(old_dir, old_name, new_dir, new_name);
  }
  int unlink_at(int dir_fd, const char* name) override {
    if (down()) return -EIO;
    return real_fs().unlink_at(dir_fd, name);
  }
  int mkdir_at(int dir_fd, const char* name, mode_t mode) override {
    if (down()) return -EIO;
    return real_fs().mkdir_at(dir_fd, name, mode);
  }
  int ftruncate(int fd, off_t length) override {
    if (down()) return -EIO;
    return real_fs().ftruncate(fd, length);
  }
  int fstat(int fd, struct stat* st) override {
    if (down()) return -EIO;
    return real_fs().fstat(fd, st);
  }
  int fstat_birth(int fd, struct stat* st, int64_t* birth_ns, Times times) override {
    if (down()) return -EIO;
    return real_fs().fstat_birth(fd, st, birth_ns, times);
  }
  int close(int fd) override { return real_fs().close(fd); }

 private:
  // A flush covering `fds` (`real` does it): the copies are what the call covers, the files as
  // they stand when it starts. Copies are taken and numbered under one mutex, so a higher
  // number is always a later copy: of two flushes running at once, the later copy wins
  // whichever completes last.
  template <class Flush>
  int flush(const std::vector<int>& fds, Flush real) {
    std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> copies;
    uint64_t taken = 0;
    {
      std::lock_guard lock(mu_);
      for (int fd : fds) {
        struct stat st {};
        if (real_fs().fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) continue;
        std::string bytes(static_cast<size_t>(st.st_size), '\0');
        const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), 0);
        if (got < 0) continue;
        bytes.resize(static_cast<size_t>(got));
        copies.emplace_back(std::make_pair(st.st_dev, st.st_ino), std::move(bytes));
      }
      taken = ++copies_;
    }
    if (down()) return -EIO;
    const int r = real();
    if (r < 0) return r;
    std::lock_guard lock(mu_);
    if (dead_) return -EIO;  // the power went while it ran: it never completed
    for (auto& [file, bytes] : copies) {
      auto& [copy, number] = synced_[file];
      if (taken > number) {
        copy = std::move(bytes);
        number = taken;
      }
    }
    ++fsyncs_;
    return 0;
  }

  // Counts the call; true once the power is gone.
  bool down() {
    std::lock_guard lock(mu_);
    ++calls_;
    if (cut_at_ != 0 && calls_ >= cut_at_) dead_ = true;
    return dead_;
  }

  mutable std::mutex mu_;
  uint64_t calls_ = 0;
  uint64_t cut_at_ = 0;
  bool dead_ = false;
  uint64_t fsyncs_ = 0;
  uint64_t copies_ = 0;
  int64_t dirty_bytes_ = 0;
  // Per file: the bytes the latest-started completed fsync kept, and that copy's number.
  std::map<std::pair<dev_t, ino_t>, std::pair<std::string, uint64_t>> synced_;
  std::set<std::string> opened_;  // paths of the files open_at opened
};

}  // namespace kagi::store::testing
