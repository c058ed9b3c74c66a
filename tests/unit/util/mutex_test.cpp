// Mutex, MutexLock, CondVar (framework/kagi/util/mutex.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <kagi/util/mutex.hpp>
#include <thread>

namespace {

using namespace std::chrono_literals;

struct Counter {
  kagi::util::Mutex mu;
  kagi::util::CondVar changed;
  int value KAGI_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, ExcludesOtherThreads) {
  Counter counter;
  auto add = [&] {
    for (int i = 0; i < 10000; ++i) {
      kagi::util::MutexLock lock(counter.mu);
      ++counter.value;
    }
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  kagi::util::MutexLock lock(counter.mu);
  EXPECT_EQ(counter.value, 20000);
}

TEST(MutexTest, WaitUntilReturnsTimeoutWhenNobodyNotifies) {
  Counter counter;
  kagi::util::MutexLock lock(counter.mu);
  const auto deadline = std::chrono::steady_clock::now() + 20ms;
  std::cv_status status = std::cv_status::no_timeout;
  while (counter.value == 0 && status == std::cv_status::no_timeout) {
    status = counter.changed.wait_until(counter.mu, deadline);
  }
  EXPECT_EQ(status, std::cv_status::timeout);
  EXPECT_GE(std::chrono::steady_clock::now(), deadline);
}

TEST(MutexTest, WaitWakesOnNotifyAndHoldsTheMutexAgain) {
  Counter counter;
  std::thread setter([&] {
    kagi::util::MutexLock lock(counter.mu);
    counter.value = 1;
    counter.changed.notify_all();
  });
  {
    kagi::util::MutexLock lock(counter.mu);
    while (counter.value == 0) counter.changed.wait(counter.mu);
    EXPECT_EQ(counter.value, 1);
    counter.value = 2;  // still held: the checker (clang) and TSan both see it guarded
  }
  setter.join();
}

TEST(MutexTest, TryLockFailsWhileHeld) {
  kagi::util::Mutex mu;
  kagi::util::MutexLock lock(mu);
  bool got = true;
  std::thread other([&] {
    got = false;
    if (mu.try_lock()) {
      got = true;
      mu.unlock();
    }
  });
  other.join();
  EXPECT_FALSE(got);
}

}  // namespace
