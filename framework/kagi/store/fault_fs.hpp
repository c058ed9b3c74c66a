// store/fault_fs.hpp — a FileSystem for tests that fails the Nth call of one kind
// (write, fsync, rename, ...) with a chosen errno, in the spirit of Boost.Beast's
// test::stream fail_count. Every other call goes to the real filesystem. It can also flip bits
// in what reads return (damage on the medium, as the storage layer sees it).
//
//   FaultFs fs;
//   fs.fail_nth(FaultFs::Op::kRename, 1, ENOSPC);   // the next rename fails
//   auto dir = DataDir::open(options, fs, ec);
//   EXPECT_FALSE(dir->commit(guard, "a.dat", "new").ok());   // "a.dat" still holds "old"
#pragma once

#include <array>
#include <cstdint>
#include <kagi/store/fs.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::store {

class FaultFs final : public FileSystem {
 public:
  // kWrite counts write and pwrite alike.
  enum class Op { kOpen, kWrite, kPread, kFsync, kRename, kUnlink, kMkdir, kFtruncate, kCount };

  FaultFs() = default;
  FaultFs(const FaultFs&) = delete;
  FaultFs& operator=(const FaultFs&) = delete;

  // Arms one fault: the nth call of `op` counted from now (1 = the next one) fails with
  // `error` (an errno value). Re-arming an op replaces its previous fault.
  void fail_nth(Op op, int n, int error) KAGI_EXCLUDES(mu_);
  // From now on every pread that covers file offset `offset` returns that byte XOR `mask`
  // (any file: tests use one log). The file itself is not touched. Until clear().
  void flip_on_read(uint64_t offset, unsigned char mask) KAGI_EXCLUDES(mu_);
  // Disarms all faults (bit flips included); counters keep running.
  void clear() KAGI_EXCLUDES(mu_);
  // Calls of `op` since construction (including the failed one).
  uint64_t calls(Op op) const KAGI_EXCLUDES(mu_);
  // open_beneath answers ENOSYS unless this is on, so that callers take the walk whose
  // steps the fault tests count; on, it is the real call (never failed, counted apart).
  void allow_direct_open(bool on) KAGI_EXCLUDES(mu_);
  uint64_t direct_opens() const KAGI_EXCLUDES(mu_);

  int open_at(int dir_fd, const char* name, int flags, mode_t mode) override;
  int open_beneath(int dir_fd, const char* path, int flags) override KAGI_EXCLUDES(mu_);
  ssize_t write(int fd, const void* data, size_t size) override;
  ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) override;
  ssize_t pread(int fd, void* buf, size_t size, off_t offset) override KAGI_EXCLUDES(mu_);
  int fsync(int fd) override;
  int syncfs(int fd) override;  // a kFsync fault point too
  int wait_writeback(int fd) override;
  int rename_at(int old_dir, const char* old_name, int new_dir, const char* new_name) override;
  int unlink_at(int dir_fd, const char* name) override;
  int mkdir_at(int dir_fd, const char* name, mode_t mode) override;
  int ftruncate(int fd, off_t length) override;
  int fstat(int fd, struct stat* st) override;
  int close(int fd) override;

 private:
  struct Fault {
    uint64_t at = 0;  // the call number that fails; 0 = none
    int error = 0;
  };
  static constexpr size_t kOps = static_cast<size_t>(Op::kCount);

  // Counts the call; returns the errno to fail it with, or 0 to let it through.
  int tick(Op op) KAGI_EXCLUDES(mu_);

  struct Flip {
    uint64_t offset = 0;
    unsigned char mask = 0;  // 0: none
  };

  mutable util::Mutex mu_;
  std::array<uint64_t, kOps> calls_ KAGI_GUARDED_BY(mu_) = {};
  std::array<Fault, kOps> faults_ KAGI_GUARDED_BY(mu_) = {};
  bool direct_allowed_ KAGI_GUARDED_BY(mu_) = false;
  Flip flip_ KAGI_GUARDED_BY(mu_);
  uint64_t direct_opens_ KAGI_GUARDED_BY(mu_) = 0;
};

}  // namespace kagi::store
