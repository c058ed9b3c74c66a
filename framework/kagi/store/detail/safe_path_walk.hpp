// store/detail/safe_path_walk.hpp — opening a data path below data.dir without ever leaving
// it or following a symlink.
//
// Two ways, same answer: the kernel resolves the whole path in one call
// (FileSystem::open_beneath: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where it can;
// otherwise the walk opens one segment at a time with O_NOFOLLOW under the descriptor of the
// segment before, so no check-then-use window exists. Only the fast path's success (or
// "missing", for readers) is trusted; every other answer goes to the walk, which also creates
// missing directories and names the step that failed.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

// A directory to make *at() calls in: data.dir's root (borrowed: SafePathWalk keeps it open
// for its whole life) or a subdirectory the walk opened (owned: closed with this object).
class DirFd {
 public:
  DirFd() = default;
  explicit DirFd(util::UniqueFd owned) : owned_(std::move(owned)) {}
  static DirFd borrowed(int fd) {
    DirFd d;
    d.borrowed_ = fd;
    return d;
  }
  DirFd(DirFd&&) noexcept = default;
  DirFd& operator=(DirFd&&) noexcept = default;

  int get() const { return owned_ ? owned_.get() : borrowed_; }

 private:
  util::UniqueFd owned_;
  int borrowed_ = -1;
};

// Refuses a path that breaks the lexical rules of store/path.hpp (Errc::kUnsafePath, the
// reason in the message); ok otherwise.
Status check_path(std::string_view op, std::string_view path);

// The Status for a failed open (-errno `r` at `step`): a refused symlink (ELOOP) is a path
// problem, Errc::kUnsafePath, not an I/O error.
Status open_failed(long r, std::string_view op, std::string_view path, std::string_view step);

class SafePathWalk {
 public:
  // `root` is data.dir, already open. Directories the walk creates get `dir_mode`; with `fsync`
  // each new directory's entry is flushed into its parent before the walk goes on.
  SafePathWalk(FileSystem& fs, util::UniqueFd root, mode_t dir_mode, bool fsync)
      : fs_(fs), root_(std::move(root)), dir_mode_(dir_mode), fsync_(fsync) {}
  SafePathWalk(const SafePathWalk&) = delete;
  SafePathWalk& operator=(const SafePathWalk&) = delete;

  int root() const { return root_.get(); }

  // Opens the directory holding `segments.back()` (the root itself for a top-level file) into
  // `*parent`. With `create`, missing directories are made. Returns 0, or -errno with
  // `*failed_step` naming the step ("mkdir a/b", "open directory a"); a symlink on the way is
  // -ELOOP.
  int open_parent(const std::vector<std::string_view>& segments, bool create, DirFd* parent,
                  std::string* failed_step) const;

  // What open_direct() says when the walk must decide: the kernel cannot resolve beneath (no
  // openat2, a sandbox: remembered), a symlink, or any other error the walk names better.
  static constexpr int kWalk = -100000;

  // `path` opened with `flags` by the kernel in one call: 0 with `*fd` set, -ENOENT, or kWalk.
  int open_direct(std::string_view path, int flags, util::UniqueFd* fd) const;

  // Opens the existing file `path` with `flags` (O_NOFOLLOW | O_CLOEXEC added) into `*fd`: 0,
  // -ENOENT if it or a directory on the way is missing, or another -errno with `*failed_step`
  // set.
  int open_existing(std::string_view path, int flags, util::UniqueFd* fd,
                    std::string* failed_step) const;
  // open_existing read-only.
  int open_readonly(std::string_view path, util::UniqueFd* fd, std::string* failed_step) const {
    return open_existing(path, O_RDONLY, fd, failed_step);
  }

 private:
  FileSystem& fs_;
  const util::UniqueFd root_;
  const mode_t dir_mode_;
  const bool fsync_;
  // false once open_beneath said ENOSYS/EPERM: the walk alone from then on. A hint shared by
  // all threads; a stale read costs one extra failed call.
  mutable std::atomic<bool> direct_open_{true};
};

}  // namespace kagi::store::detail
