// lock/table.hpp — the in-process lock table: per-name shared/exclusive state with FIFO
// fairness and deadlines, in front of the cross-process file lock (lock/file_lock.hpp).
//
// Why a table: POSIX/OFD record locks do not exclude threads sharing a descriptor (LevelDB
// keeps a table beside fcntl for the same reason). The table decides which threads of this
// process hold a name; the file lock decides which process does.
//
// Contract:
//  - Waiters are granted strictly in arrival order: a waiting writer is never overtaken by
//    readers that arrive after it.
//  - A shared acquire of a name that other threads of the process already hold shared is
//    granted without any system call, in batches: when a batch runs out (kMaxBatch grants or
//    kMaxBatchHold since its first such grant) the table asks the file once whether a
//    writer of another process is waiting. If none is, a new batch starts; if one is,
//    newcomers queue, the holders drain, the file lock is released and the writer gets its
//    turn. So readers of one process never starve writers of another.
//  - On release, if the next waiter is covered by the file lock already held (exclusive covers
//    both), it is handed over without system calls, within the same batch bounds.
//  - Every wait ends by its deadline. An entry exists only while someone holds or waits for
//    its name: size() is 0 when nothing is held. (With a FileLocks, up to 64 idle entries per
//    shard are kept with their open descriptor, as the descriptor cache; they are not counted.)
//
// Thread-safe. The table may be used without a FileLocks (in-process exclusion only).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include <kagi/lock/file_lock.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::lock {

class LockTable {
 public:
  static constexpr int kMaxBatch = 32;
  static constexpr std::chrono::milliseconds kMaxBatchHold{20};

  // `files` may be null (in-process only); it must outlive the table.
  explicit LockTable(FileLocks* files);
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  struct Entry;  // opaque to callers
  // A granted lock; pass it back to release() exactly once.
  struct Grant {
    Entry* entry = nullptr;
    Mode mode = Mode::kShared;
    explicit operator bool() const { return entry != nullptr; }
  };

  // Waits until `name` is granted in `mode` or `deadline` passes. Errc::kTimeout on
  // deadline; a file error (errno / Errc::kNameCollision) if the lock file failed.
  // `contended` (optional) is set if the call had to wait for anyone.
  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline, Grant& out,
                          bool* contended = nullptr);
  // Non-blocking: grants only if available right now (in-process and cross-process).
  std::error_code try_acquire(std::string_view name, Mode mode, Grant& out);
  void release(Grant& grant);

  // Entries alive (names held or waited for).
  size_t size() const;
  // Threads queued for `name` right now (for tests and the admin page).
  size_t waiting(std::string_view name) const;

 private:
  struct Shard;
  Shard& shard_for(std::string_view name) const;
  std::error_code ensure_file(Shard& shard, std::unique_lock<std::mutex>& lock, Entry* e, Mode mode,
                              Clock::time_point deadline, bool try_only, bool* contended);
  void release_locked(Shard& shard, Entry* e, Mode mode);
  void grant_waiters(Entry* e);
  bool shared_may_join(Entry* e);
  bool batch_lasts(Entry* e);
  void unref_locked(Shard& shard, Entry* e);
  Entry* find_or_create(Shard& shard, std::string_view name);

  FileLocks* files_;
  const size_t max_idle_per_shard_;  // idle entries kept with their descriptor (0: none)
  static constexpr size_t kShards = 16;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace kagi::lock
