// store/detail/group_sync.hpp — group commit: many writers' records made durable by one fsync
// per file, the way a database's write-ahead log flushes for every transaction in a batch.
//
// A writer appends its record without flushing, releases its lock, and only then asks for the
// record to be durable (sync()). Each file has its own batches: requests arriving while a flush
// of that file runs wait in its next batch; the first of them to find no flush of the file
// running flushes for the whole batch (one fsync, covering every record written to the file
// before the call), then wakes the rest. Different files flush in parallel (the filesystem's
// journal merges their commits). No thread of its own: the leader is always a waiter.
//
// The GroupSync also remembers how far this process knows each file durable, so a reader can
// tell cheaply whether what it read could still be lost (durable()). Files are told apart by
// device, inode and birth time (a replaced log's inode number may come back).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t birth_ns = 0;
  bool operator==(const FileId&) const = default;
};

struct FileIdHash {
  size_t operator()(const FileId& id) const noexcept;
};

// One file that must be durable up to `end`, with a descriptor to flush it through.
struct SyncNeed {
  FileId id;
  uint64_t end = 0;
  util::UniqueFd fd;
  std::string path;  // for the error message
};

class GroupSync {
 public:
  explicit GroupSync(FileSystem& fs) : fs_(fs) {}
  ~GroupSync();  // drains what was submitted, then stops the flush thread
  GroupSync(const GroupSync&) = delete;
  GroupSync& operator=(const GroupSync&) = delete;

  // Whether this process knows `id` durable up to `end` at least.
  bool durable(const FileId& id, uint64_t end) const KAGI_EXCLUDES(mu_);
  // Records that `id` is durable up to `end` (after a flush made outside the group).
  void mark(const FileId& id, uint64_t end) KAGI_EXCLUDES(mu_);

  // Returns once every need is durable (flushed by this call or by a batch it joined), or with
  // the first failure ("flush <path>: fsync: ..."). Needs already durable cost nothing.
  Status sync(std::vector<SyncNeed> needs) KAGI_EXCLUDES(mu_);

  // The same without blocking: `done` runs once every need is durable, or with the first
  // failure: at once on this thread when nothing needs flushing, else on the GroupSync's flush
  // thread (started on first use), which flushes everything submitted meanwhile in one go. A
  // request's worker thread is then free while its answer waits, so more requests join a flush.
  void submit(std::vector<SyncNeed> needs, std::function<void(Status)> done) KAGI_EXCLUDES(mu_);
  // Waits until everything submitted so far has been flushed and its `done` has run.
  void drain() KAGI_EXCLUDES(mu_);

  // fsync calls made by sync() and the flush thread so far (what the group saved shows against the
  // requests).
  uint64_t flushes() const KAGI_EXCLUDES(mu_);

 private:
  // The requests that one fsync of a file answers.
  struct Batch {
    util::UniqueFd fd;  // the first request's descriptor
    uint64_t end = 0;   // the furthest end asked for
    std::string path;
    int error = 0;  // errno of a failed flush
    bool done = false;
  };
  // Per file being flushed or waited for: the batch collecting, whether one is being flushed.
  struct FileQueue {
    std::shared_ptr<Batch> collecting;
    bool flushing = false;
  };

  struct Submitted {
    std::vector<SyncNeed> needs;
    std::function<void(Status)> done;
  };

  Status sync_one(SyncNeed need) KAGI_REQUIRES(mu_);
  void flush_loop() KAGI_EXCLUDES(mu_);
  // One round of the flush thread: one fsync per file of `round`, then every `done`.
  void flush_round(std::vector<Submitted>& round) KAGI_EXCLUDES(mu_);
  void mark_locked(const FileId& id, uint64_t end) KAGI_REQUIRES(mu_);

  FileSystem& fs_;
  mutable util::Mutex mu_;
  util::CondVar flushed_;
  std::unordered_map<FileId, FileQueue, FileIdHash> queues_ KAGI_GUARDED_BY(mu_);
  uint64_t flushes_ KAGI_GUARDED_BY(mu_) = 0;
  // The flush thread's queue.
  util::CondVar work_;
  util::CondVar idle_;
  std::vector<Submitted> submitted_ KAGI_GUARDED_BY(mu_);
  bool flushing_round_ KAGI_GUARDED_BY(mu_) = false;
  bool stop_ KAGI_GUARDED_BY(mu_) = false;
  std::thread flusher_ KAGI_GUARDED_BY(mu_);
  std::unordered_map<FileId, uint64_t, FileIdHash> durable_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::store::detail
