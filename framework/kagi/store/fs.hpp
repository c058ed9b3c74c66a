// store/fs.hpp — the few filesystem calls the storage layer makes, behind an interface so
// tests can fail the Nth one deterministically (see store/fault_fs.hpp).
//
// Each call mirrors its POSIX namesake but reports failure as a negative errno instead of
// -1 + errno (errno is thread-local state a wrapper could clobber). Calls are not retried on
// EINTR here; callers that loop (short writes) handle that.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace kagi::store {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Returns the new descriptor, or -errno.
  virtual int open_at(int dir_fd, const char* name, int flags, mode_t mode) = 0;
  // openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: `path` (several segments) below
  // `dir_fd`, with no "..", no absolute path and no symlink anywhere on the way, resolved by
  // the kernel in one call. -ENOSYS where unavailable (the default: the fault-injecting
  // test filesystem leaves callers on their segment-by-segment walk).
  virtual int open_beneath(int dir_fd, const char* path, int flags) {
    (void)dir_fd, (void)path, (void)flags;
    return -ENOSYS;
  }
  // Return bytes transferred, or -errno.
  virtual ssize_t write(int fd, const void* data, size_t size) = 0;
  virtual ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) = 0;
  virtual ssize_t pread(int fd, void* buf, size_t size, off_t offset) = 0;
  // Return 0, or -errno.
  virtual int fsync(int fd) = 0;
  // fsync without the metadata a read does not need (fdatasync(2)): for a file overwritten in
  // place, one write to the device and no journal commit. Default: fsync.
  virtual int fdatasync(int fd) { return fsync(fd); }
  // Makes everything written to fd's whole filesystem durable (syncfs(2)): one journal commit
  // for many files, where an fsync each would commit once per file.
  virtual int syncfs(int fd) = 0;
  // A hint, not a flush: starts writing the file's dirty pages out now (sync_file_range
  // SYNC_FILE_RANGE_WRITE), so that fsyncs of several files that follow overlap their writes.
  // Errors are ignored (the fsync that follows reports them). Default: nothing.
  virtual void start_writeback(int fd) { (void)fd; }
  // After a syncfs: waits for the file's writeback in flight, and returns a write error of the
  // file not yet reported through this open file (sync_file_range SYNC_FILE_RANGE_WAIT_AFTER),
  // else 0. A syncfs reports a filesystem's error once, through whichever file it was called
  // on; this asks each file for its own. Default: 0.
  virtual int wait_writeback(int fd) {
    (void)fd;
    return 0;
  }
  // Bytes the kernel holds dirty or under writeback, all filesystems together (/proc/meminfo's
  // Dirty + Writeback): about what a syncfs now would have to write, one's own files included.
  // -errno where unknown (the default: -ENOSYS).
  virtual int64_t dirty_bytes() { return -ENOSYS; }
  virtual int rename_at(int old_dir, const char* old_name, int new_dir, const char* new_name) = 0;
  virtual int unlink_at(int dir_fd, const char* name) = 0;
  virtual int mkdir_at(int dir_fd, const char* name, mode_t mode) = 0;
  virtual int ftruncate(int fd, off_t length) = 0;
  virtual int fstat(int fd, struct stat* st) = 0;
  // Whether a status asks for the file's times. Linux 6.13 and later (multigrain timestamps)
  // mark a file whose change or modify time was asked, and the next write to it then stamps a
  // fine-grained time and dirties the inode (on ext4 a journal update), where it would
  // otherwise keep the coarse time it already has: about 0.8 µs more per append. kSkip leaves
  // st_ctim and st_mtim zero; a writer checking the log it is about to append to uses it.
  enum class Times { kAsk, kSkip };
  // fstat, plus the file's birth time in ns (statx STATX_BTIME) where the filesystem records
  // one, else 0. Tells a file from a later one that reuses its inode number.
  virtual int fstat_birth(int fd, struct stat* st, int64_t* birth_ns, Times times = Times::kAsk) {
    (void)times;
    *birth_ns = 0;
    return fstat(fd, st);
  }
  // fstat_birth of `path` below `dir_fd`, without opening it and without following a symlink
  // at its end, with attributes asked fresh from the filesystem (AT_STATX_FORCE_SYNC). The
  // path is not resolved safely: only compare what it names with a file opened safely before.
  // -ENOSYS where unavailable (the default).
  virtual int stat_birth_at(int dir_fd, const char* path, struct stat* st, int64_t* birth_ns,
                            Times times = Times::kAsk) {
    (void)dir_fd, (void)path, (void)st, (void)birth_ns, (void)times;
    return -ENOSYS;
  }
  virtual int close(int fd) = 0;
  // A second descriptor (close-on-exec) for the open file `fd`, or -errno.
  virtual int dup(int fd);
};

// The real POSIX calls. One process-wide instance; thread-safe.
FileSystem& real_fs();

}  // namespace kagi::store
