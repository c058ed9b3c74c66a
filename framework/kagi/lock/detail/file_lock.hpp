// lock/detail/file_lock.hpp — cross-process locks: flock(2) on one file per name, with
// bounded waits.
//
// flock locks (like OFD record locks) belong to the open file description, not the process:
// the kernel drops them when the last descriptor closes, so a process killed with SIGKILL
// frees its locks at once. They do not exclude threads that share the description, so the
// in-process LockTable (lock/detail/table.hpp) sits in front: at most one thread per process works
// a name's file lock. flock was chosen over F_OFD_SETLK because it is the cheaper system call
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
// that another process waits and let the name go (lock/detail/table.hpp).
//
// FileLocks keeps no descriptors: the lock table (lock/detail/table.hpp) owns each name's
// descriptor and keeps a bounded number of idle ones open for reuse. Descriptors must be
// opened in the process that uses them: inherited across fork() they would share lock
// ownership with the parent.
#pragma once

#include <sys/file.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <system_error>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/lock/mode.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::lock {

class FileLocks {
 public:
  // `dir` must exist. `wait_signal` is the real-time signal used to bound blocking waits
  // (0: poll instead; also if another handler owns the signal).
  FileLocks(std::string dir, int wait_signal);
  FileLocks(const FileLocks&) = delete;
  FileLocks& operator=(const FileLocks&) = delete;

  // Opens `name`'s lock file (created if missing, with the name written inside) into `fd`.
  // Errc::kNameCollision if the file records another name; the errno otherwise.
  std::error_code open(std::string_view name, util::UniqueFd& fd) const;

  // Takes the lock on `fd` in `mode`, waiting until `deadline`. Errc::kTimeout if the
  // deadline passed first; the errno otherwise. `contended` is set if the first try failed.
  std::error_code lock(int fd, Mode mode, Clock::time_point deadline, bool* contended) const;
  // One non-blocking try: empty on success, Errc::kTimeout if taken, the errno otherwise.
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
  static bool writer_waiting(int fd);
  // Waits, polling writer_waiting() with short sleeps, until no thread of another process
  // waits for `fd`'s lock or `until` passes. This process calls it after yielding the lock to
  // such a waiter, so that its own threads leave the free lock to the waiter the kernel woke
  // instead of taking it back first (flock keeps no queue).
  enum class OtherWaiters { kNone, kServed, kStillWaiting };  // at the first look; gone; at `until`
  static OtherWaiters await_other_waiters(int fd, Clock::time_point until);

  bool signal_waits() const { return wait_signal_ != 0; }

 private:
  std::error_code wait_with_timer(int fd, int type, Clock::time_point deadline) const;
  static std::error_code wait_polling(int fd, int type, Clock::time_point deadline);

  const std::string dir_;
  int wait_signal_;  // set once, by the constructor
};

// Installs the no-op handler for `signal` (no SA_RESTART) unless another handler owns it.
// Returns false if it cannot be used; idempotent.
bool install_wait_signal(int signal);

}  // namespace kagi::lock
