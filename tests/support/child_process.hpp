// tests/support/child_process.hpp — a test body in a forked child, and its exit status; and a
// child that stops at a point of its choosing until the parent lets it go on.
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

// A child that pauses where its body says (the fencing tests: lock and read, pause — the
// parent stops it and takes the lock over meanwhile — then write late):
//
//   PausingChild child([&](const auto& pause) { lock_and_read(); if (!pause()) return 2;
//                                              return late_write_refused() ? 0 : 1; });
//   ASSERT_TRUE(child.wait_paused());   // the child is inside pause()
//   ...; ASSERT_TRUE(child.resume());   // pause() returns true in the child
//   EXPECT_EQ(wait_exit(child.pid()), 0);
class PausingChild {
 public:
  using Pause = std::function<bool()>;
  explicit PausingChild(const std::function<int(const Pause& pause)>& body) {
    if (::pipe(ready_) != 0 || ::pipe(go_) != 0) return;
    pid_ = spawn([&] {
      return body([this] {
        char c = 'r';
        return ::write(ready_[1], &c, 1) == 1 && ::read(go_[0], &c, 1) == 1;
      });
    });
  }
  ~PausingChild() {
    for (int fd : {ready_[0], ready_[1], go_[0], go_[1]})
      if (fd >= 0) ::close(fd);
  }
  PausingChild(const PausingChild&) = delete;
  PausingChild& operator=(const PausingChild&) = delete;

  pid_t pid() const { return pid_; }
  // Waits until the child is in pause(); false if it ended first.
  bool wait_paused() {
    char c;
    return pid_ > 0 && ::read(ready_[0], &c, 1) == 1;
  }
  // Lets pause() return in the child.
  bool resume() { return ::write(go_[1], "g", 1) == 1; }

 private:
  int ready_[2] = {-1, -1}, go_[2] = {-1, -1};
  pid_t pid_ = -1;
};

}  // namespace kagi::test_support
