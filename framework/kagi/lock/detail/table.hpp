// lock/detail/table.hpp — the in-process lock table: per-name shared/exclusive state with FIFO
// fairness and deadlines, in front of the cross-process file lock (lock/detail/file_lock.hpp).
//
// Why a table: flock and OFD locks do not exclude threads sharing a descriptor (LevelDB keeps
// a table beside fcntl for the same reason). The table decides which threads of this process
// hold a name; the file lock decides which process does.
//
// Contract:
//  - Waiters are granted in arrival order: a waiting writer is never overtaken by readers
//    that arrive after it, nor by other waiters.
//  - One exception keeps a busy name moving: when a writer at the head of the queue is woken
//    to take the name, the name stays free until it runs, and a writer that is running (not
//    queued) may take it first, as the kernel's own locks allow. It may do so only while the
//    head has waited less than the overtake window (kOvertakeWindow unless the constructor
//    says otherwise); after that, releases hand the name straight to the queue. Without it,
//    every release under contention waits for a sleeping thread to be scheduled before
//    anyone can go on (a lock convoy).
//  - A shared acquire of a name that other threads of the process already hold shared is
//    granted without any system call, in batches: when a batch runs out (kMaxBatch grants or
//    kMaxBatchHold since its first such grant) the table asks the file once whether a
//    writer of another process is waiting. If none is, a new batch starts; if one is,
//    newcomers queue, the holders drain, the file lock is released and the writer gets its
//    turn. So readers of one process never starve writers of another.
//  - A yield is kept: after the file lock was released that way, this process's next taker
//    of it waits (polling the intent mark, at most kMaxBatchHold) until the other process's
//    waiter has taken it, instead of retaking the free lock before the woken waiter runs.
//    A waiter that does not take it within that bound (its process stopped) is not waited
//    for again until a batch's probe finds nobody waiting.
//  - On release, if the next waiter is covered by the file lock already held (exclusive covers
//    both), the file lock stays held for it (or for a running writer that takes the name
//    first), so the name passes without system calls, within the same batch bounds.
//  - Every wait ends by its deadline; kNoWait never waits at all. An entry exists only while
//    someone holds or waits for its name: size() is 0 when nothing is held.
//  - The descriptor cache: an entry whose name is released keeps its open lock file, idle,
//    for the next acquire of the name (no open(), no allocation). At most `max_idle_fds`
//    (rounded up to a multiple of the shard count) stay open idle; the oldest goes first.
//
// Thread-safe. The table may be used without a FileLocks (in-process exclusion only).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>
#include <system_error>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/detail/file_lock.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::lock {

class LockTable {
 public:
  static constexpr int kMaxBatch = 32;
  static constexpr std::chrono::milliseconds kMaxBatchHold{20};
  // How long a queued writer may be overtaken by running writers before it is handed the name.
  static constexpr std::chrono::milliseconds kOvertakeWindow{1};
  // As a deadline: grant only what is available right now, in-process and cross-process.
  static constexpr Clock::time_point kNoWait = Clock::time_point::min();

  // `files` may be null (in-process only); it must outlive the table. `max_idle_fds` bounds
  // the lock files kept open for names nobody holds. `overtake_window`: see the contract
  // (zero: strict arrival order).
  explicit LockTable(FileLocks* files, size_t max_idle_fds = 1024,
                     Clock::duration overtake_window = kOvertakeWindow);
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  struct Shard;  // opaque to callers
  struct Entry;
  // A granted lock; pass it back to release() exactly once.
  struct Grant {
    Entry* entry = nullptr;
    Mode mode = Mode::kShared;
    explicit operator bool() const { return entry != nullptr; }
  };

  // Waits until `name` is granted in `mode` or `deadline` passes (kNoWait: never waits).
  // Errc::kTimeout on deadline; a file error (errno / Errc::kNameCollision) if the lock file
  // failed. `contended` (optional) is set if the call had to wait for anyone.
  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline, Grant& out,
                          bool* contended = nullptr);
  // acquire() with kNoWait.
  std::error_code try_acquire(std::string_view name, Mode mode, Grant& out) {
    return acquire(name, mode, kNoWait, out);
  }
  void release(Grant& grant);

  // Entries alive (names held or waited for; idle cached entries do not count).
  size_t size() const;
  // Lock file descriptors open (held, waited for, or idle in the cache).
  size_t open_fds() const;
  // Threads queued for `name` right now (for tests and the admin page).
  size_t waiting(std::string_view name) const;

 private:
  Shard& shard_for(std::string_view name) const;

  FileLocks* const files_;
  static constexpr size_t kShards = 16;
  const size_t max_idle_per_shard_;  // idle entries kept with their descriptor (0: none)
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace kagi::lock
