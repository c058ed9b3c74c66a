// util/wait_fd.hpp: ready, the deadline, and a ppoll() that keeps failing (made to fail with
// ENOMEM by a seccomp filter on one thread), which must be waited out to the deadline, never
// answered "ready" (its callers would read EAGAIN and call again at once, spinning).
#include <kagi/util/wait_fd.hpp>

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <thread>

namespace kagi::util {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

class WaitFd : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::pipe(fds_), 0); }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fds_[2] = {-1, -1};
};

TEST_F(WaitFd, ReadyAtOnceOrFalseAtTheDeadline) {
  const auto began = SteadyClock::now();
  EXPECT_FALSE(wait_fd(fds_[0], POLLIN, began + 100ms));
  EXPECT_GE(SteadyClock::now() - began, 100ms);
  ASSERT_EQ(::write(fds_[1], "x", 1), 1);
  EXPECT_TRUE(wait_fd(fds_[0], POLLIN, SteadyClock::now() + 5s));
}

TEST_F(WaitFd, AFailingPollIsWaitedOutNotAnsweredReady) {
  int installed = 0;
  bool ready = true;
  SteadyClock::duration took{};
  std::thread t([&] {
    // This thread only: ppoll() fails with ENOMEM.
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ppoll, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      installed = -errno;
      return;
    }
    installed = 1;
    const auto began = SteadyClock::now();
    ready = wait_fd(fds_[0], POLLIN, began + 300ms);
    took = SteadyClock::now() - began;
  });
  t.join();
  if (installed != 1) GTEST_SKIP() << "no seccomp filter here (errno " << -installed << ")";
  EXPECT_FALSE(ready) << "a failed ppoll() was answered as ready";
  EXPECT_GE(took, 250ms);
}

}  // namespace
}  // namespace kagi::util
