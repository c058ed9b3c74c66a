// util/mutex.hpp — the mutexes kagi's own code locks, annotated for clang's checker.
//
// Mutex / SharedMutex are std::mutex / std::shared_mutex with the thread-safety attributes of
// util/thread_annotations.hpp, so `KAGI_GUARDED_BY(mu_)` on a field is checked at compile
// time. Take them with the scoped types below (MutexLock, ReaderLock, WriterLock); wait with
// CondVar. Same cost as the std types: every member is an inline forward.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include <kagi/util/thread_annotations.hpp>

namespace kagi::util {

class KAGI_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() KAGI_ACQUIRE() { mu_.lock(); }
  void unlock() KAGI_RELEASE() { mu_.unlock(); }
  bool try_lock() KAGI_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the checker the caller holds it (for callbacks it cannot follow); checks nothing.
  void assert_held() const KAGI_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class KAGI_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() KAGI_ACQUIRE() { mu_.lock(); }
  void unlock() KAGI_RELEASE() { mu_.unlock(); }
  void lock_shared() KAGI_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() KAGI_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope.
class KAGI_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KAGI_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() KAGI_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds a SharedMutex shared (ReaderLock) or exclusive (WriterLock) for its scope.
class KAGI_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) KAGI_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() KAGI_RELEASE() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

class KAGI_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) KAGI_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() KAGI_RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable over Mutex. Every wait needs the mutex held and gives it back held;
// wait_until is the bounded form (kagi's waits have deadlines) and says whether it timed out.
class CondVar {
 public:
  void wait(Mutex& mu) KAGI_REQUIRES(mu) {
    std::unique_lock<std::mutex> held(mu.mu_, std::adopt_lock);
    cv_.wait(held);
    held.release();
  }
  template <typename Clock, typename Duration>
  std::cv_status wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      KAGI_REQUIRES(mu) {
    std::unique_lock<std::mutex> held(mu.mu_, std::adopt_lock);
    std::cv_status status = cv_.wait_until(held, deadline);
    held.release();
    return status;
  }
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace kagi::util
