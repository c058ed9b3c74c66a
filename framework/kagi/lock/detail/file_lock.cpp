#include <kagi/lock/detail/file_lock.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include <kagi/lock/detail/log.hpp>
#include <kagi/lock/detail/names.hpp>
#include <kagi/util/mutex.hpp>

namespace kagi::lock {
namespace {

void on_wait_signal(int) {}  // only interrupts F_OFD_SETLKW

util::Mutex g_signal_mu;
int g_installed_signal KAGI_GUARDED_BY(g_signal_mu) = 0;

timespec to_timespec(std::chrono::nanoseconds ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
  return ts;
}

// One POSIX timer per thread, aimed at that thread, reused by every wait of the thread.
class ThreadTimer {
 public:
  ~ThreadTimer() {
    if (created_) timer_delete(id_);
  }
  bool arm(int signal, std::chrono::nanoseconds in) {
    if (created_ && signal_ != signal) {
      timer_delete(id_);
      created_ = false;
    }
    if (!created_) {
      sigevent ev{};
      ev.sigev_notify = SIGEV_THREAD_ID;
      ev.sigev_signo = signal;
      ev._sigev_un._tid = gettid();
      if (timer_create(CLOCK_MONOTONIC, &ev, &id_) != 0) return false;
      created_ = true;
      signal_ = signal;
    }
    itimerspec spec{};
    spec.it_value = to_timespec(std::max(in, std::chrono::nanoseconds(1000)));
    // Re-fires so a signal that arrived just before the thread entered fcntl is not lost.
    spec.it_interval = to_timespec(std::chrono::milliseconds(1));
    return timer_settime(id_, 0, &spec, nullptr) == 0;
  }
  void disarm() {
    itimerspec spec{};
    timer_settime(id_, 0, &spec, nullptr);
  }

 private:
  timer_t id_{};
  bool created_ = false;
  int signal_ = 0;
};

thread_local ThreadTimer t_timer;

// The lock itself is flock(2) on the descriptor; byte 1 carries the waiters' OFD intent
// marks (on Linux flock and record locks are independent). The name is stored from byte 1 on
// (record locks do not care about the bytes under them).
int ofd(int fd, int cmd, short type, off_t byte) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = byte;
  fl.l_len = 1;
  return ::fcntl(fd, cmd, &fl);
}

}  // namespace

bool install_wait_signal(int signal) {
  util::MutexLock lock(g_signal_mu);
  if (g_installed_signal == signal) return true;
  struct sigaction old {};
  if (sigaction(signal, nullptr, &old) != 0) return false;
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != &on_wait_signal) {
    return false;
  }
  struct sigaction sa {};
  sa.sa_handler = &on_wait_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the point is to interrupt the wait
  if (sigaction(signal, &sa, nullptr) != 0) return false;
  g_installed_signal = signal;
  return true;
}

FileLocks::FileLocks(std::string dir, int wait_signal)
    : dir_(std::move(dir)), wait_signal_(wait_signal) {
  if (wait_signal_ != 0 && !install_wait_signal(wait_signal_)) {
    log_event("signal " + std::to_string(wait_signal_) +
              " has another handler; lock waits poll with backoff instead");
    wait_signal_ = 0;
  }
}

std::error_code FileLocks::open(std::string_view name, util::UniqueFd& fd) const {
  const std::string path = dir_ + "/" + lock_file_name(name);
  util::UniqueFd file(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!file) return {errno, std::generic_category()};
  // The file records its full name: a second name hashed to the same file is detected here.
  char stored[kMaxNameBytes + 1];
  ssize_t n = ::pread(file.get(), stored, sizeof stored, 1);
  if (n == 0) {
    if (::pwrite(file.get(), name.data(), name.size(), 1) != static_cast<ssize_t>(name.size())) {
      return {errno, std::generic_category()};
    }
  } else if (n < 0 || std::string_view(stored, static_cast<size_t>(n)) != name) {
    return make_error_code(n < 0 ? Errc::kBackend : Errc::kNameCollision);
  }
  fd = std::move(file);
  return {};
}

std::error_code FileLocks::lock(int fd, Mode mode, Clock::time_point deadline,
                                bool* contended) const {
  const int type = mode == Mode::kShared ? LOCK_SH : LOCK_EX;
  if (::flock(fd, type | LOCK_NB) == 0) return {};
  if (errno != EWOULDBLOCK) return {errno, std::generic_category()};
  if (contended) *contended = true;
  if (deadline <= Clock::now()) return make_error_code(Errc::kTimeout);  // a try, or too late
  // Every waiter marks its intent, so a process that keeps the name (shared batches, or
  // exclusive hand-overs between its threads) sees that another process waits and lets go.
  const bool intent = ofd(fd, F_OFD_SETLK, F_RDLCK, 1) == 0;
  std::error_code ec =
      wait_signal_ != 0 ? wait_with_timer(fd, type, deadline) : wait_polling(fd, type, deadline);
  if (intent) ofd(fd, F_OFD_SETLK, F_UNLCK, 1);
  return ec;
}

bool FileLocks::writer_waiting(int fd) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 1;
  fl.l_len = 1;
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return false;
  return fl.l_type != F_UNLCK;
}

FileLocks::OtherWaiters FileLocks::await_other_waiters(int fd, Clock::time_point until) {
  // The waiter drops its mark as soon as it holds the lock: a scheduling delay away.
  auto pause = std::chrono::microseconds(20);
  OtherWaiters seen = OtherWaiters::kNone;
  while (writer_waiting(fd)) {
    const auto now = Clock::now();
    if (now >= until) return OtherWaiters::kStillWaiting;
    seen = OtherWaiters::kServed;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, until - now));
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(500));
  }
  return seen;
}

std::error_code FileLocks::wait_with_timer(int fd, int type, Clock::time_point deadline) const {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return make_error_code(Errc::kTimeout);
  // Threads that block signals (e.g. servers that leave signals to one sigwait thread) would
  // never see the timer: unblock it for this wait only.
  sigset_t wanted, old;
  sigemptyset(&wanted);
  sigaddset(&wanted, wait_signal_);
  if (pthread_sigmask(SIG_UNBLOCK, &wanted, &old) != 0) return wait_polling(fd, type, deadline);
  const bool was_blocked = sigismember(&old, wait_signal_) == 1;
  if (!t_timer.arm(wait_signal_, left)) {
    if (was_blocked) pthread_sigmask(SIG_BLOCK, &wanted, nullptr);
    return wait_polling(fd, type, deadline);
  }
  std::error_code result;
  for (;;) {
    if (::flock(fd, type) == 0) break;
    if (errno != EINTR) {
      result = {errno, std::generic_category()};
      break;
    }
    if (Clock::now() >= deadline) {
      result = make_error_code(Errc::kTimeout);
      break;
    }
  }
  t_timer.disarm();
  if (was_blocked) pthread_sigmask(SIG_BLOCK, &wanted, nullptr);
  return result;
}

std::error_code FileLocks::wait_polling(int fd, int type, Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    auto now = Clock::now();
    if (now >= deadline) return make_error_code(Errc::kTimeout);
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    if (::flock(fd, type | LOCK_NB) == 0) return {};
    if (errno != EWOULDBLOCK) return {errno, std::generic_category()};
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(2));
  }
}

}  // namespace kagi::lock
