#include <kagi/store/fault_fs.hpp>

namespace kagi::store {

void FaultFs::fail_nth(Op op, int n, int error) {
  util::MutexLock lock(mu_);
  auto i = static_cast<size_t>(op);
  faults_[i] = Fault{calls_[i] + static_cast<uint64_t>(n), error};
}

void FaultFs::clear() {
  util::MutexLock lock(mu_);
  faults_.fill(Fault{});
  flip_ = Flip{};
}

void FaultFs::flip_on_read(uint64_t offset, unsigned char mask) {
  util::MutexLock lock(mu_);
  flip_ = Flip{offset, mask};
}

uint64_t FaultFs::calls(Op op) const {
  util::MutexLock lock(mu_);
  return calls_[static_cast<size_t>(op)];
}

int FaultFs::tick(Op op) {
  util::MutexLock lock(mu_);
  auto i = static_cast<size_t>(op);
  ++calls_[i];
  if (faults_[i].at != 0 && calls_[i] == faults_[i].at) {
    int error = faults_[i].error;
    faults_[i] = Fault{};
    return error;
  }
  return 0;
}

int FaultFs::open_at(int dir_fd, const char* name, int flags, mode_t mode) {
  if (int e = tick(Op::kOpen)) return -e;
  return real_fs().open_at(dir_fd, name, flags, mode);
}

void FaultFs::allow_direct_open(bool on) {
  util::MutexLock lock(mu_);
  direct_allowed_ = on;
}

uint64_t FaultFs::direct_opens() const {
  util::MutexLock lock(mu_);
  return direct_opens_;
}

int FaultFs::open_beneath(int dir_fd, const char* path, int flags) {
  {
    util::MutexLock lock(mu_);
    if (!direct_allowed_) return -ENOSYS;
    ++direct_opens_;
  }
  return real_fs().open_beneath(dir_fd, path, flags);
}

ssize_t FaultFs::write(int fd, const void* data, size_t size) {
  if (int e = tick(Op::kWrite)) return -e;
  return real_fs().write(fd, data, size);
}

ssize_t FaultFs::pwrite(int fd, const void* data, size_t size, off_t offset) {
  if (int e = tick(Op::kWrite)) return -e;
  return real_fs().pwrite(fd, data, size, offset);
}

ssize_t FaultFs::pread(int fd, void* buf, size_t size, off_t offset) {
  if (int e = tick(Op::kPread)) return -e;
  const ssize_t n = real_fs().pread(fd, buf, size, offset);
  util::MutexLock lock(mu_);
  const auto from = static_cast<uint64_t>(offset);
  if (n > 0 && flip_.mask != 0 && flip_.offset >= from &&
      flip_.offset < from + static_cast<uint64_t>(n)) {
    static_cast<unsigned char*>(buf)[flip_.offset - from] ^= flip_.mask;
  }
  return n;
}

int FaultFs::fsync(int fd) {
  if (int e = tick(Op::kFsync)) return -e;
  return real_fs().fsync(fd);
}

int FaultFs::syncfs(int fd) {
  if (int e = tick(Op::kFsync)) return -e;
  return real_fs().syncfs(fd);
}

int FaultFs::wait_writeback(int fd) { return real_fs().wait_writeback(fd); }

int FaultFs::rename_at(int old_dir, const char* old_name, int new_dir, const char* new_name) {
  if (int e = tick(Op::kRename)) return -e;
  return real_fs().rename_at(old_dir, old_name, new_dir, new_name);
}

int FaultFs::unlink_at(int dir_fd, const char* name) {
  if (int e = tick(Op::kUnlink)) return -e;
  return real_fs().unlink_at(dir_fd, name);
}

int FaultFs::mkdir_at(int dir_fd, const char* name, mode_t mode) {
  if (int e = tick(Op::kMkdir)) return -e;
  return real_fs().mkdir_at(dir_fd, name, mode);
}

int FaultFs::ftruncate(int fd, off_t length) {
  if (int e = tick(Op::kFtruncate)) return -e;
  return real_fs().ftruncate(fd, length);
}

// fstat and close are not fault points: a failed close after a successful fsync has nothing
// left to lose, and fstat failures are not a crash path worth a knob.
int FaultFs::fstat(int fd, struct stat* st) { return real_fs().fstat(fd, st); }
int FaultFs::close(int fd) { return real_fs().close(fd); }

}  // namespace kagi::store
