// store/detail/group_sync.hpp — group commit: many writers' records made durable by one fsync
// per file, the way a database's write-ahead log flushes for every transaction in a batch.
//
// A writer appends its record without flushing, releases its lock, and only then asks for the
// record to be durable (submit(); DurableScope::wait() is the blocking form). One flush thread per
// GroupSync (started on first use) takes everything asked for since its last round, makes one fsync
// per file (covering every record written to the file before the call) — or, for many files of one
// filesystem, one syncfs for them all, while the kernel has little else to write — and then answers
// every request of the round. Once rounds answer several requests each, a round first waits for
// more to join, as long as a flush has lately taken (at most max_batch_wait), as ext4's journal
// does with its commits. Requests arriving during a round wait for the next one.
//
// With a journal (store/detail/journal.hpp; data.journal, on by default), a round copies what
// each log gained since this process last knew it durable into the journal and flushes that one
// file instead: one write and one fdatasync for any number of logs. A log this process never
// flushed (it does not know where its durable part ends), one on another filesystem, and more
// bytes than the journal holds are flushed as above.
//
// The GroupSync also remembers how far this process knows each file durable, so a reader can
// tell cheaply whether what it read could still be lost (durable()). Files are told apart by
// device, inode and birth time (a replaced log's inode number may come back).
//
// A failed flush marks its file failed for as long as the GroupSync lives (until the process
// restarts). The kernel reports a write-back error once, and may already have dropped the pages
// it could not write: a later flush of the same file succeeds without them. So every later
// request to make that file durable fails too (those waiting in a later round, those submitted
// after, readers' included), mark() no longer counts it durable, and writers are told to refuse
// it (failed_flush()), as PostgreSQL stops rather than trust a file after a failed fsync.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>
#include <kagi/store/store_stats.hpp>
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

struct GroupSyncOptions {
  // A round with this many files or more on one filesystem flushes them with one syncfs instead
  // of an fsync each (0: always an fsync each)...
  size_t syncfs_min_files = 0;
  // ... as long as the kernel holds at most this much dirty data (FileSystem::dirty_bytes();
  // 0: no limit): a syncfs writes out everything dirty on the filesystem, and must not wait for
  // a large write of some other program's.
  uint64_t syncfs_max_dirty_bytes = 0;
  // A round waits at most this long for more requests to join it.
  std::chrono::microseconds max_batch_wait{1000};
};

// One file that must be durable up to `end`, with a descriptor to flush it through.
struct SyncNeed {
  FileId id;
  uint64_t end = 0;
  util::UniqueFd fd;
  std::string path;  // for the error message
};

class Journal;

class GroupSync {
 public:
  // A round stops waiting for company once this many requests are waiting.
  static constexpr size_t kBatchFull = 64;

  explicit GroupSync(FileSystem& fs, GroupSyncOptions options = {});
  ~GroupSync();  // drains what was submitted, then stops the flush thread
  GroupSync(const GroupSync&) = delete;
  GroupSync& operator=(const GroupSync&) = delete;

  // Whether this process knows `id` durable up to `end` at least.
  bool durable(const FileId& id, uint64_t end) const KAGI_EXCLUDES(mu_);
  // Records that `id` is durable up to `end` (after a flush made outside the group); not for a
  // file whose flush failed.
  void mark(const FileId& id, uint64_t end) KAGI_EXCLUDES(mu_);
  // Marks `id` failed: a flush of it made outside the group failed with `error` (an errno).
  void fail(const FileId& id, int error, std::string_view path) KAGI_EXCLUDES(mu_);
  // Failed (naming `path` and the first error) if a flush of `id` failed in this process: no
  // record written to it since can be made durable any more. Ok otherwise.
  Status failed_flush(const FileId& id, std::string_view path) const KAGI_EXCLUDES(mu_);

  // `done` runs once every need is durable, or with the first failure ("flush <path>: fsync:
  // ..."): at once on this thread when nothing needs flushing, else on the flush thread. A
  // request's worker thread is then free while its answer waits, so more requests share a round.
  // Called on the flush thread itself (from a `done`), it flushes there and then.
  void submit(std::vector<SyncNeed> needs, std::function<void(Status)> done) KAGI_EXCLUDES(mu_);
  // Waits until everything submitted so far has been flushed and its `done` has run.
  void drain() KAGI_EXCLUDES(mu_);

  // From now on rounds go through `journal` where they can (before the first submit()).
  void use_journal(std::unique_ptr<Journal> journal) KAGI_EXCLUDES(mu_);
  // The rounds so far: how many, what they answered, how long their flushes took, the flush
  // calls they made (fsync, syncfs, the journal's fdatasync: what the group saved shows
  // against the requests), those that went through the journal and its checkpoints, and those
  // that could have used a syncfs but made an fsync each, the kernel holding more dirty data
  // than syncfs_max_dirty_bytes (or not saying how much). `replayed` is left 0.
  StoreStats stats() const KAGI_EXCLUDES(mu_);

 private:
  struct Submitted {
    std::vector<SyncNeed> needs;
    std::function<void(Status)> done;
  };

  void flush_loop() KAGI_EXCLUDES(mu_);
  // One round: one fsync per file of `round` (or one syncfs per filesystem), then every `done`
  // (on the flush thread; on the caller's when it is the flush thread or the GroupSync is
  // stopping). Returns how long the flush calls took, in ns (the answers not included).
  int64_t flush_round(std::vector<Submitted>& round) KAGI_EXCLUDES(mu_);
  void mark_locked(const FileId& id, uint64_t end) KAGI_REQUIRES(mu_);
  Status failed_flush_locked(const FileId& id, std::string_view path) const KAGI_REQUIRES(mu_);
  void fail_locked(const FileId& id, int error, const char* call, std::string_view path)
      KAGI_REQUIRES(mu_);
  struct RoundFile;
  // Writes what `files` gained into the journal, where it can: the files it covered are
  // durable then (marked `journaled`). On a failed write the journal is given up, and every
  // file is left to its own flush.
  void journal_round(std::vector<RoundFile*>& files) KAGI_EXCLUDES(mu_);
  // Whether a syncfs now would write little besides this round's files.
  bool little_else_dirty() KAGI_EXCLUDES(mu_);

  FileSystem& fs_;
  const GroupSyncOptions options_;
  mutable util::Mutex mu_;
  StoreStats stats_ KAGI_GUARDED_BY(mu_);             // journal_checkpoints: asked of the journal
  uint64_t round_flush_ns_ KAGI_GUARDED_BY(mu_) = 0;  // stats_.round_flush_us, in ns
  // The flush thread's queue.
  util::CondVar work_;
  util::CondVar idle_;
  std::vector<Submitted> submitted_ KAGI_GUARDED_BY(mu_);
  bool flushing_round_ KAGI_GUARDED_BY(mu_) = false;
  // For batching: how many requests the last round answered, and how long a round's flush has
  // lately taken (a moving average, ns; 0: none yet).
  size_t last_round_requests_ KAGI_GUARDED_BY(mu_) = 0;
  int64_t flush_ns_ KAGI_GUARDED_BY(mu_) = 0;
  bool batching_ KAGI_GUARDED_BY(mu_) = false;  // the flush thread waits for more to join
  bool stop_ KAGI_GUARDED_BY(mu_) = false;
  std::thread flusher_ KAGI_GUARDED_BY(mu_);
  std::thread::id flusher_id_ KAGI_GUARDED_BY(mu_);
  std::unordered_map<FileId, uint64_t, FileIdHash> durable_ KAGI_GUARDED_BY(mu_);
  // Files whose flush failed: the error, and the call that reported it.
  struct Failure {
    int error = 0;
    const char* call = "fsync";
  };
  std::unordered_map<FileId, Failure, FileIdHash> failed_ KAGI_GUARDED_BY(mu_);
  std::atomic<bool> any_failed_{false};  // failed_ is not empty (read without mu_)
  // Set before the first round, then used by rounds only; null: none. Once a write of it
  // failed it refuses more (Journal::broken), and rounds flush the logs themselves.
  std::unique_ptr<Journal> journal_;
};

}  // namespace kagi::store::detail
