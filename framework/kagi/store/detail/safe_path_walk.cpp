#include <kagi/store/detail/safe_path_walk.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/path.hpp>

namespace kagi::store::detail {

namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// "a/b" for segments [a, b, c] up to index 1: the part of the path a step failed on.
std::string prefix(const std::vector<std::string_view>& segments, size_t last) {
  return std::string(segments[0].data(), segments[last].end());
}

}  // namespace

Status check_path(std::string_view op, std::string_view path) {
  if (const char* problem = path_problem(path)) {
    return Status::failed(Errc::kUnsafePath, op, path, problem);
  }
  return {};
}

Status open_failed(long r, std::string_view op, std::string_view path, std::string_view step) {
  if (r == -ELOOP) {
    return Status::failed(Errc::kUnsafePath, op, path,
                          std::string(step) + ": symlink (not followed below data.dir)");
  }
  return Status::failed(sys_error(r), op, path, step);
}

int SafePathWalk::open_parent(const std::vector<std::string_view>& segments, bool create,
                              DirFd* parent, std::string* failed_step) const {
  DirFd dir = DirFd::borrowed(root_.get());
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    const std::string name(segments[i]);
    int next = fs_.open_at(dir.get(), name.c_str(), kDirFlags, 0);
    if (next == -ENOENT && create) {
      int r = fs_.mkdir_at(dir.get(), name.c_str(), dir_mode_);
      if (r == 0 && fsync_) r = fs_.fsync(dir.get());  // the new directory's entry must be durable
      if (r < 0 && r != -EEXIST) {
        *failed_step = "mkdir " + prefix(segments, i);
        return r;
      }
      next = fs_.open_at(dir.get(), name.c_str(), kDirFlags, 0);
    }
    if (next == -ENOTDIR) {
      // O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR: tell a symlink from a file.
      struct stat st {};
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        next = -ELOOP;
      }
    }
    if (next < 0) {
      *failed_step = "open directory " + prefix(segments, i);
      return next;
    }
    dir = DirFd(util::UniqueFd(next));
  }
  *parent = std::move(dir);
  return 0;
}

int SafePathWalk::open_direct(std::string_view path, int flags, util::UniqueFd* fd) const {
  if (!direct_open_.load(std::memory_order_relaxed)) return kWalk;
  const std::string p(path);
  const int r = fs_.open_beneath(root_.get(), p.c_str(), flags);
  if (r >= 0) {
    fd->reset(r);
    return 0;
  }
  if (r == -ENOENT) return r;
  if (r == -ENOSYS || r == -EPERM) direct_open_.store(false, std::memory_order_relaxed);
  return kWalk;
}

int SafePathWalk::open_existing(std::string_view path, int flags, util::UniqueFd* fd,
                                std::string* failed_step) const {
  const int all_flags = flags | O_NOFOLLOW | O_CLOEXEC;
  if (int r = open_direct(path, all_flags, fd); r != kWalk) return r;
  const auto segments = path_segments(path);
  DirFd parent;
  if (int r = open_parent(segments, false, &parent, failed_step); r < 0) return r;
  const std::string leaf(segments.back());
  const int r = fs_.open_at(parent.get(), leaf.c_str(), all_flags, 0);
  if (r < 0) {
    *failed_step = "open";
    return r;
  }
  fd->reset(r);
  return 0;
}

}  // namespace kagi::store::detail
