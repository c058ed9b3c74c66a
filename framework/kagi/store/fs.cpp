#include <kagi/store/fs.hpp>

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>  // renameat
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace kagi::store {

namespace {

int ret(int r) { return r < 0 ? -errno : r; }
ssize_t ret(ssize_t r) { return r < 0 ? -errno : r; }

class RealFs final : public FileSystem {
 public:
  int open_at(int dir_fd, const char* name, int flags, mode_t mode) override {
    return ret(::openat(dir_fd, name, flags, mode));
  }
  int open_beneath(int dir_fd, const char* path, int flags) override {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    return ret(static_cast<int>(::syscall(SYS_openat2, dir_fd, path, &how, sizeof how)));
  }
  ssize_t write(int fd, const void* data, size_t size) override {
    return ret(::write(fd, data, size));
  }
  ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) override {
    return ret(::pwrite(fd, data, size, offset));
  }
  ssize_t pread(int fd, void* buf, size_t size, off_t offset) override {
    return ret(::pread(fd, buf, size, offset));
  }
  int fsync(int fd) override { return ret(::fsync(fd)); }
  int syncfs(int fd) override { return ret(::syncfs(fd)); }
  void start_writeback(int fd) override { ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE); }
  int rename_at(int old_dir, const char* old_name, int new_dir, const char* new_name) override {
    return ret(::renameat(old_dir, old_name, new_dir, new_name));
  }
  int unlink_at(int dir_fd, const char* name) override { return ret(::unlinkat(dir_fd, name, 0)); }
  int mkdir_at(int dir_fd, const char* name, mode_t mode) override {
    return ret(::mkdirat(dir_fd, name, mode));
  }
  int ftruncate(int fd, off_t length) override { return ret(::ftruncate(fd, length)); }
  int fstat(int fd, struct stat* st) override { return ret(::fstat(fd, st)); }
  int fstat_birth(int fd, struct stat* st, int64_t* birth_ns) override {
    struct statx sx {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0) {
      if (errno != ENOSYS) return -errno;
      *birth_ns = 0;
      return fstat(fd, st);
    }
    *st = {};
    st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
    st->st_ino = sx.stx_ino;
    st->st_mode = sx.stx_mode;
    st->st_nlink = sx.stx_nlink;
    st->st_uid = sx.stx_uid;
    st->st_gid = sx.stx_gid;
    st->st_size = static_cast<off_t>(sx.stx_size);
    *birth_ns = (sx.stx_mask & STATX_BTIME)
                    ? sx.stx_btime.tv_sec * 1'000'000'000LL + sx.stx_btime.tv_nsec
                    : 0;
    return 0;
  }
  int close(int fd) override { return ret(::close(fd)); }
};

}  // namespace

FileSystem& real_fs() {
  static RealFs fs;
  return fs;
}

}  // namespace kagi::store
