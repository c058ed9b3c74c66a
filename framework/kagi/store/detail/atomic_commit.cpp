#include <kagi/store/detail/atomic_commit.hpp>

#include <fcntl.h>

#include <atomic>
#include <cstdint>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/util/process.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

namespace {

// Process-wide, so two DataDirs on one directory (tests, or an app opening it twice) never
// pick the same temp name.
std::atomic<uint64_t> temp_counter{0};

// The temp file until it is renamed over the target: removed on every other way out, so a
// failed commit leaves nothing behind.
class PendingTemp {
 public:
  PendingTemp(FileSystem& fs, int dir_fd, std::string name)
      : fs_(fs), dir_fd_(dir_fd), name_(std::move(name)) {}
  ~PendingTemp() {
    if (!renamed_) fs_.unlink_at(dir_fd_, name_.c_str());
  }
  PendingTemp(const PendingTemp&) = delete;
  PendingTemp& operator=(const PendingTemp&) = delete;

  const char* name() const { return name_.c_str(); }
  // It is the target now: nothing to remove.
  void renamed() { renamed_ = true; }

 private:
  FileSystem& fs_;
  const int dir_fd_;
  const std::string name_;
  bool renamed_ = false;
};

}  // namespace

std::string temp_name() {
  return std::string(kTempPrefix) + std::to_string(util::current_pid()) + "-" +
         std::to_string(temp_counter.fetch_add(1, std::memory_order_relaxed));
}

Status atomic_commit(const CommitOptions& options, int dir_fd, std::string_view leaf,
                     std::string_view bytes, const lock::Guard& guard, std::string_view path) {
  FileSystem& fs = options.fs;
  auto failed = [&](std::error_code ec, std::string_view step) {
    return Status::failed(ec, "commit", path, step);
  };
  std::string temp = temp_name();
  const int opened =
      fs.open_at(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 options.file_mode);
  if (opened < 0) return failed(sys_error(opened), "create temp file");
  // Declared in this order so that a failure closes the file before removing it.
  PendingTemp pending(fs, dir_fd, std::move(temp));
  util::UniqueFd fd(opened);

  if (long r = write_all(fs, fd.get(), bytes, -1); r < 0) return failed(sys_error(r), "write");
  if (options.fsync) {
    if (int r = fs.fsync(fd.get()); r < 0) return failed(sys_error(r), "fsync");
  }
  // Closed here, not by UniqueFd, because the result counts: NFS reports a failed write-back
  // only at close.
  if (int r = fs.close(fd.release()); r < 0) return failed(sys_error(r), "close");
  if (std::error_code ec = guard.verify()) {
    return failed(ec, "fence (lock '" + guard.name() + "')");
  }
  const std::string target(leaf);
  if (int r = fs.rename_at(dir_fd, pending.name(), dir_fd, target.c_str()); r < 0) {
    return failed(sys_error(r), "rename");
  }
  pending.renamed();
  if (options.fsync) {
    if (int r = fs.fsync(dir_fd); r < 0) {
      return failed(sys_error(r),
                    "fsync directory (the new content is in place but may not survive a power "
                    "loss)");
    }
  }
  return {};
}

}  // namespace kagi::store::detail
