// tests/support/child_process.hpp — a test body in a forked child, and its exit status.
//
//   pid_t child = test_support::spawn([&] { return holds_its_lock() ? 0 : 1; });
//   EXPECT_EQ(test_support::wait_exit(child), 0);
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <functional>

namespace kagi::test_support {

// Runs `body` in a child process; its return value is the exit status (99 if it threw).
inline pid_t spawn(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", ::getpid(), e.what());
    }
    ::_exit(code);
  }
  return pid;
}

// The child's exit status, or 128 + the signal that ended it; -1 if it cannot be waited for.
inline int wait_exit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace kagi::test_support
