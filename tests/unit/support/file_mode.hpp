// tests/unit/support/file_mode.hpp — file permission checks for the file-mode tests.
#pragma once

#include <sys/stat.h>

#include <string>

namespace kagi::test_support {

// The permission bits of `path` (lstat: a symlink is not followed), or -1 if it is missing.
inline int mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

// Sets the process umask for one scope. The mode tests run under the usual 022, so a file
// created 0644 shows as 0644 and fails a check for 0600 (a 077 umask would hide the bug).
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

}  // namespace kagi::test_support
