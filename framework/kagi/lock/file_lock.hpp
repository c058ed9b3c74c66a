// lock/file_lock.hpp — cross-process locks: flock(2) on one file per name, with a bounded
// cache of open descriptors and bounded waits.
//
// flock locks (like OFD record locks) belong to the open file description, not the process:
// the kernel drops them when the last descriptor closes, so a process killed with SIGKILL
// frees its locks at once. They do not exclude threads that share the description, so the
// in-process LockTable (lock/table.hpp) sits in front: at most one thread per process works a
// name's file lock. flock was chosen over F_OFD_SETLK because it is the cheaper system call
// (docs/LOCKING.md has the numbers); both behave the same here.
//
// Waiting: a non-blocking try first (the uncontended case costs one system call). If busy,
// the thread blocks in flock(), so the kernel wakes it the moment the holder releases, and a
// per-thread POSIX timer delivers a signal (no SA_RESTART) at the deadline and every
// millisecond after it, so the wait ends with EINTR no later than the deadline (+ about 1 ms)
// even if the signal raced the call. If the signal cannot be installed (another handler owns
// it), waits fall back to LOCK_NB polling with capped exponential backoff (50 µs .. 2 ms).
//
// Threads that must wait first take a shared "intent" lock on byte 1 of the file (the lock
// itself is byte 0), so a process whose threads keep passing a name among themselves can see
// that another process waits and let the name go (lock/table.hpp).
//
// A FileLocks must be created in the process that uses it: descriptors inherited across
// fork() would share lock ownership with the parent.
#pragma once

#include <sys/file.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include <kagi/lock/mode.hpp>

namespace kagi::lock {

class FileLocks {
 public:
  // `dir` must exist. `max_idle_fds` bounds the descriptors kept open for names not in use.
  // `wait_signal` is the real-time signal used to bound blocking waits (0: poll instead).
  FileLocks(std::string dir, size_t max_idle_fds, int wait_signal);
  ~FileLocks();
  FileLocks(const FileLocks&) = delete;
  FileLocks& operator=(const FileLocks&) = delete;

  // Returns an open descriptor for `name`'s lock file (created if missing, with the name
  // written inside), from the cache if possible. The descriptor stays reserved for the caller
  // until unpin(). At most one pin per name at a time (the table guarantees it).
  std::error_code pin(std::string_view name, int& fd);
  void unpin(std::string_view name, int fd);

  // Takes the lock on `fd` in `mode`, waiting until `deadline`. Errc::kTimeout if the
  // deadline passed first; the errno otherwise. `contended` is set if the first try failed.
  std::error_code lock(int fd, Mode mode, Clock::time_point deadline, bool* contended);
  // One non-blocking try: empty on success, Errc::kTimeout if taken, the errno otherwise.
  // Inline, like unlock(): every frame between a lock call and its system call costs a
  // mispredicted return on kernels that refill the return stack buffer on each syscall.
  static std::error_code try_lock(int fd, Mode mode) {
    if (::flock(fd, (mode == Mode::kShared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0) return {};
    if (errno == EWOULDBLOCK) return make_error_code(Errc::kTimeout);
    return {errno, std::generic_category()};
  }
  // Releases the lock on `fd` (never blocks).
  static void unlock(int fd) { ::flock(fd, LOCK_UN); }
  // True if a thread of another process (another file description) is waiting for `fd`'s
  // lock: waiters mark byte 1 while they wait. One fcntl (F_OFD_GETLK); the table asks only
  // when a batch of system-call-free grants runs out.
  bool writer_waiting(int fd);

  // Descriptors open (pinned + idle), for tests and the admin page.
  size_t open_fds() const;
  bool signal_waits() const { return wait_signal_ != 0; }

 private:
  std::error_code open_file(std::string_view name, int& fd);
  std::error_code wait_with_timer(int fd, int type, Clock::time_point deadline);
  std::error_code wait_polling(int fd, int type, Clock::time_point deadline);

  const std::string dir_;
  const size_t max_idle_;
  int wait_signal_;

  struct Cached {
    int fd = -1;
    bool pinned = false;
    const std::string* key = nullptr;  // the map's key
    Cached* newer = nullptr;           // idle list links, valid while !pinned
    Cached* older = nullptr;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  void unlink_idle(Cached* c);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Cached, Hash, std::equal_to<>> fds_;  // guarded by mu_
  Cached* newest_ = nullptr;  // idle descriptors, most recently used first; guarded by mu_
  Cached* oldest_ = nullptr;  // guarded by mu_
  size_t idle_count_ = 0;     // guarded by mu_
};

// Installs the no-op handler for `signal` (no SA_RESTART) unless another handler owns it.
// Returns false if it cannot be used; idempotent.
bool install_wait_signal(int signal);

}  // namespace kagi::lock
