// tests/unit/store/forwarding_fs.hpp — the real filesystem, every call passed on to real_fs():
// a base for test filesystems that change or watch only a few calls (slow_sync_fs.hpp).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <kagi/store/fs.hpp>

namespace kagi::store::testing {

// The path the open descriptor `fd` names (its /proc/self/fd link), or "" if unknown.
inline std::string path_of_fd(int fd) {
  char target[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

class ForwardingFs : public FileSystem {
 public:
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
  int fsync(int fd) override { return real_fs().fsync(fd); }
  int syncfs(int fd) override { return real_fs().syncfs(fd); }
  void start_writeback(int fd) override { real_fs().start_writeback(fd); }
  int wait_writeback(int fd) override { return real_fs().wait_writeback(fd); }
  int64_t dirty_bytes() override { return real_fs().dirty_bytes(); }
  int rename_at(int a, const char* b, int c, const char* d) override {
    return real_fs().rename_at(a, b, c, d);
  }
  int unlink_at(int d, const char* n) override { return real_fs().unlink_at(d, n); }
  int mkdir_at(int d, const char* n, mode_t m) override { return real_fs().mkdir_at(d, n, m); }
  int ftruncate(int fd, off_t l) override { return real_fs().ftruncate(fd, l); }
  int fstat(int fd, struct stat* st) override { return real_fs().fstat(fd, st); }
  int fstat_birth(int fd, struct stat* st, int64_t* b, Times t) override {
    return real_fs().fstat_birth(fd, st, b, t);
  }
  int stat_birth_at(int d, const char* p, struct stat* st, int64_t* b, Times t) override {
    return real_fs().stat_birth_at(d, p, st, b, t);
  }
  int close(int fd) override { return real_fs().close(fd); }
};

}  // namespace kagi::store::testing
