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

#include <kagi/store/detail/dirty_pages.hpp>

namespace kagi::store {

namespace {

int ret(int r) { return r < 0 ? -errno : r; }
ssize_t ret(ssize_t r) { return r < 0 ? -errno : r; }

int64_t ns_of(const struct statx_timestamp& t) { return t.tv_sec * 1'000'000'000LL + t.tv_nsec; }

// What statx filled, as a struct stat (with the change time) and the birth time (0: none).
void from_statx(const struct statx& sx, struct stat* st, int64_t* birth_ns) {
  *st = {};
  st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  st->st_ino = sx.stx_ino;
  st->st_mode = sx.stx_mode;
  st->st_nlink = sx.stx_nlink;
  st->st_uid = sx.stx_uid;
  st->st_gid = sx.stx_gid;
  st->st_size = static_cast<off_t>(sx.stx_size);
  if (sx.stx_mask & STATX_CTIME) {
    st->st_ctim.tv_sec = sx.stx_ctime.tv_sec;
    st->st_ctim.tv_nsec = sx.stx_ctime.tv_nsec;
  }
  if (sx.stx_mask & STATX_MTIME) {
    st->st_mtim.tv_sec = sx.stx_mtime.tv_sec;
    st->st_mtim.tv_nsec = sx.stx_mtime.tv_nsec;
  }
  *birth_ns = (sx.stx_mask & STATX_BTIME) ? ns_of(sx.stx_btime) : 0;
}

constexpr unsigned kStatxMask = STATX_BASIC_STATS | STATX_BTIME;
constexpr unsigned kTimes = STATX_ATIME | STATX_MTIME | STATX_CTIME;

unsigned statx_mask(FileSystem::Times times) {
  return times == FileSystem::Times::kAsk ? kStatxMask : kStatxMask & ~kTimes;
}

}  // namespace

int FileSystem::dup(int fd) { return ret(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

namespace {

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
  int fdatasync(int fd) override { return ret(::fdatasync(fd)); }
  int syncfs(int fd) override { return ret(::syncfs(fd)); }
  void start_writeback(int fd) override { ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE); }
  int wait_writeback(int fd) override {
    return ret(::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_AFTER));
  }
  int64_t dirty_bytes() override { return detail::read_meminfo_dirty(); }
  int rename_at(int old_dir, const char* old_name, int new_dir, const char* new_name) override {
    return ret(::renameat(old_dir, old_name, new_dir, new_name));
  }
  int unlink_at(int dir_fd, const char* name) override { return ret(::unlinkat(dir_fd, name, 0)); }
  int mkdir_at(int dir_fd, const char* name, mode_t mode) override {
    return ret(::mkdirat(dir_fd, name, mode));
  }
  int ftruncate(int fd, off_t length) override { return ret(::ftruncate(fd, length)); }
  int fstat(int fd, struct stat* st) override { return ret(::fstat(fd, st)); }
  int fstat_birth(int fd, struct stat* st, int64_t* birth_ns, Times times) override {
    struct statx sx {};
    if (::statx(fd, "", AT_EMPTY_PATH, statx_mask(times), &sx) != 0) {
      if (errno != ENOSYS) return -errno;
      *birth_ns = 0;
      return fstat(fd, st);
    }
    from_statx(sx, st, birth_ns);
    return 0;
  }
  int stat_birth_at(int dir_fd, const char* path, struct stat* st, int64_t* birth_ns,
                    Times times) override {
    struct statx sx {};
    const int flags = AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC;
    if (::statx(dir_fd, path, flags, statx_mask(times), &sx) != 0) {
      return -errno;
    }
    from_statx(sx, st, birth_ns);
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
