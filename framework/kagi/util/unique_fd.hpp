// util/unique_fd.hpp — owns one file descriptor and closes it exactly once.
//
// Every descriptor kagi opens is held by a UniqueFd from the moment open()/socket()/accept()
// returns, so an early return or an exception cannot leak it and no error path closes by
// hand. Move-only. A negative value means "none".
#pragma once

#include <unistd.h>

#include <utility>

namespace kagi::util {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  // Gives the descriptor up without closing it.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  // Closes the held descriptor (if any) and holds `fd` instead. close() errors are ignored:
  // after close() the descriptor is gone either way (POSIX leaves EINTR unspecified, Linux
  // closes it), and a retry could close a descriptor another thread just opened.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace kagi::util
