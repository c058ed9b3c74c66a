// store/data_dir.hpp — the data directory (conf data.dir): guarded, crash-safe file storage,
// the "files" DataStore (data.backend = "files"; store/data_store.hpp has the shared rules).
//
// Every access names the lock that protects the data, so the right order is the only one
// that compiles:
//
//   auto board = ctx.locks.exclusive("bbs/board/3");             // 1. lock
//   std::string posts = ctx.data.read(board, "bbs/3.dat").value(); // 2. read (needs a guard)
//   posts = add_post(posts, form);                               // 3. modify in memory
//   ctx.data.commit(board, "bbs/3.dat", posts).check();           // 4. commit (exclusive only)
//
// Reading takes any lock::Guard; committing and appending take a lock::ExclusiveGuard, so a
// shared holder cannot write and nobody can read before locking. The guard → file binding is
// the caller's, written at every call: one lock name must protect a file everywhere in the
// app. The DataDir remembers which lock each file was first used under, counts every access
// under a different lock and logs the first one per file: "the wrong lock" protects nothing.
//
// Crash safety. commit() writes a temp file beside the target, fsyncs it, renames it over the
// target and fsyncs the directory: after a crash at any point the file holds the old or the
// new bytes, never a mix. append() adds one checksummed record to a log; a crash mid-append
// leaves a torn tail that read_log() ignores and the next append() truncates, so only a record
// whose append() had not returned can be lost. Only a tail that no intact record follows is
// torn: damage in the middle of a log (a flipped bit) is skipped by readers, kept on disk,
// reported (error log line, damaged_spans(), store/damage.hpp) and never truncated. With fsync =
// false ("never") the same order is kept but nothing is flushed: a process crash is still safe, a
// power loss may lose the last commits.
//
// Group commit. With fsync on, an append made inside a request (a store::DurableScope, which the
// App opens around every handler) writes its record and leaves the flush to the scope: the
// request releases its lock first and then waits, sharing one fsync per log with every request
// waiting at that moment. The answer still goes out only once the record is durable, and a read
// that returns records this process does not yet know durable makes its request wait for them
// too, so no answer ever shows what a power cut could take back (store/durable_scope.hpp).
//
// Fencing. Right before a commit becomes visible (before the rename; before an append's
// write) the guard is asked whether it still holds its lock (lock::Guard::verify); if not,
// nothing is applied and the lock layer's error is returned.
//
// Modes: files are created 0600 and directories 0700 (0640 / 0750 with group_readable): the
// data holds password hashes and client tags.
//
// Paths are relative to data.dir (see store/path.hpp) and are opened segment by segment with
// O_NOFOLLOW under the parent's directory fd (existing files: in one openat2 call with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it): "..", absolute paths, NUL
// and symlinks anywhere below data.dir are refused with Errc::kUnsafePath. data.dir itself may
// be a symlink.
//
// Errors are values: Status / Result with a message naming the operation, the file and the
// failing step ("commit bbs/3.dat: rename: No space left on device"); on any error the old
// content is intact. Thread-safe; one instance per process; any number of processes may share
// a data.dir (the locks keep them apart).
//
// The implementation is one job per file under store/detail/: safe_path_walk (opening below
// data.dir), atomic_commit, log_append, log_recovery (where whole records end), log_read,
// temp_cleanup, lock_binding, damage_report and kept_log; this class composes them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/lock/guard.hpp>
#include <kagi/store/data_store.hpp>
#include <kagi/store/detail/damage_report.hpp>
#include <kagi/store/detail/group_sync.hpp>
#include <kagi/store/detail/journal.hpp>
#include <kagi/store/detail/lock_binding.hpp>
#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/detail/log_read.hpp>
#include <kagi/store/detail/log_recovery.hpp>
#include <kagi/store/detail/safe_path_walk.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/log_cursor.hpp>
#include <kagi/store/status.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store {

struct DataOptions {
  std::string dir = "var/data";  // data.dir: created if missing
  bool fsync = true;             // data.fsync: "always" (true) | "never" (false)
  bool group_readable = false;   // data.group_readable: new files 0640 / dirs 0750, not 0600 / 0700
  // data.syncfs_min_files: a group commit round with this many logs or more to flush makes one
  // syncfs of data.dir's filesystem instead of an fsync per log; 0 = always an fsync each.
  size_t syncfs_min_files = 3;
  // data.syncfs_max_dirty_kb: ... but only while the kernel holds at most this much dirty data
  // (all filesystems), so that the syncfs waits for little but kagi's own; 0 = no limit.
  uint64_t syncfs_max_dirty_kb = 4096;
  // data.journal: with fsync, group commit writes what logs gained to this process's journal
  // and flushes that one file (store/detail/journal.hpp) where it can; on a local filesystem
  // only. Journals left by earlier processes are replayed by open() either way.
  bool journal = true;
  uint64_t journal_kb = 8192;  // data.journal_kb: the journal's size
  // How long a group commit round waits at most for more requests to join it (tests lengthen it).
  std::chrono::microseconds group_max_batch_wait{1000};
};

class DataDir final : public DataStore {
 public:
  // Creates options.dir if missing (with the directory mode above), opens it, and removes temp
  // files left by processes that died mid-commit. Returns null and sets `ec` on failure. `fs` must
  // outlive the DataDir (tests pass a FaultFs; everyone else the real one).
  static std::unique_ptr<DataDir> open(const DataOptions& options, std::error_code& ec);
  static std::unique_ptr<DataDir> open(const DataOptions& options, FileSystem& fs,
                                       std::error_code& ec);

  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;
  ~DataDir() override;

  // --- whole files ---------------------------------------------------------------------

  // The file's bytes. A missing file reads as empty: for apps "no posts yet" and "empty"
  // are the same state, and a first commit creates it. Use exists() to tell them apart.
  Result<std::string> read(const lock::Guard& guard, std::string_view path) const override;
  Result<bool> exists(const lock::Guard& guard, std::string_view path) const override;

  // Atomically replaces the file's content with `bytes` (creating it and its parent
  // directories if needed). On error the old content is intact.
  Status commit(const lock::ExclusiveGuard& guard, std::string_view path,
                std::string_view bytes) override;

  // Removes the file (durably with fsync on). Removing a missing file is not an error.
  Status remove(const lock::ExclusiveGuard& guard, std::string_view path) override;

  // --- append-only logs ------------------------------------------------------------------

  // Appends one record (any bytes, up to 16 MiB) to the log, creating it if needed. When
  // append() returns ok, the record survives a crash (with fsync on, a power loss too).
  Status append(const lock::ExclusiveGuard& guard, std::string_view path,
                std::string_view record) override;

  // Atomically replaces the whole log with `records` (compaction, deletions): a crash leaves
  // the old log or the new one. Same fencing and errors as commit().
  Status rewrite_log(const lock::ExclusiveGuard& guard, std::string_view path,
                     const std::vector<std::string>& records) override;

  // The log's records, oldest first; at most the last `last_n`. A torn tail (a crash
  // mid-append) is skipped; so is a damaged span in the middle (reported once per process),
  // and the intact records after it are returned. A missing log has no records. A file that is not
  // a kagi log is refused (Errc::kCorrupt) rather than misread.
  Result<std::vector<std::string>> read_log(
      const lock::Guard& guard, std::string_view path,
      size_t last_n = std::numeric_limits<size_t>::max()) const override;

  // The records appended since `cursor` (from an earlier call; a default cursor reads the
  // whole log), and the cursor moved past them. When the log was replaced, shrank or
  // vanished since, the whole log is returned with `restarted` set: the caller starts over.
  // This makes a reader that keeps what it decoded cost O(new records) per read instead of
  // O(log). On error the cursor is unchanged.
  Result<LogTail> read_log_since(const lock::Guard& guard, std::string_view path,
                                 LogCursor& cursor) const override;

  // An inotify watch on the folder (created if missing): appends, commits and compactions
  // of this host's processes. Not for NFS (no events there: callers re-read on a timer too).
  std::unique_ptr<ChangeFeed> watch(std::string_view folder, std::error_code& ec) const override;
  std::string_view backend() const override { return "files"; }

  const std::string& dir() const { return dir_; }
  bool fsync_enabled() const override { return fsync_; }
  // The modes new files and folders get (0600 / 0700, or 0640 / 0750 with group_readable);
  // for code that creates folders below dir() itself (the chat's watcher).
  mode_t file_mode() const { return file_mode_; }
  mode_t dir_mode() const { return dir_mode_; }
  // Temp files removed by open() (left by processes that died mid-commit).
  size_t cleaned_temp_files() const { return cleaned_; }
  // How many times a file was touched under a different lock than before (each is logged).
  uint64_t lock_mismatches() const override { return bindings_.mismatches(); }
  // Damaged spans found in the middle of logs by this DataDir (each counted and logged once;
  // also in store::damage_log()).
  uint64_t damaged_spans() const { return damage_.reported(); }
  // What group commit did so far (store_stats.hpp), with the entries open() replayed.
  StoreStats store_stats() const override;
  // What open() found in the journals it replayed, in detail.
  const detail::ReplayCounts& replayed() const { return replayed_; }
  void drain() override { sync_.drain(); }

 private:
  DataDir(std::string dir, util::UniqueFd root, const DataOptions& options, FileSystem& fs,
          bool root_is_local);

  // For open(): replays the journals no live process holds (docs/STORAGE.md, the journal), then
  // with fsync and data.journal on a local filesystem takes one for this process's group commit.
  Status replay_and_take_journal(const DataOptions& options);
  // What every call checks first: refuses an unsafe path and a guard that no longer holds its
  // lock; remembers (or compares) the lock protecting `path`.
  Status check_access(std::string_view op, std::string_view path, const lock::Guard& guard) const;
  // With fsync on: what a read returned must be durable before anyone sees it (now, or when
  // the request's DurableScope waits). Flushes through `fd`, which it takes unless `keep` (then
  // through a second descriptor of the same file).
  Status require_durable(std::string_view path, util::UniqueFd& fd, const detail::ReadExtent& seen,
                         bool keep = false) const;
  // A writer's read of `path`: the descriptor this thread kept from an earlier grant, if one
  // statx of the path (local filesystems only) finds the very file it holds; its status in
  // `*now` (without times: fs.hpp). False (and the kept descriptor closed) otherwise.
  // `*held_since`: it was kept under this same grant, with `cursor` where it was verified (so
  // the file's identity and size tell it unchanged since: log_unchanged_since).
  bool reuse_kept_log(std::string_view path, const lock::Guard& guard, const LogCursor& cursor,
                      util::UniqueFd* fd, detail::FileStatus* now, bool* held_since) const;
  // Opens the log `path` for read_log_since: read-write when the read is a writer's (`*keep`
  // stays true; the append that follows takes the descriptor, store/detail/kept_log.hpp), else
  // (or if the file refuses to be written) read-only, with `*keep` false.
  int open_log_to_read(std::string_view path, const lock::Guard& guard, util::UniqueFd* fd,
                       bool* keep, std::string* step) const;

  const uint64_t serial_;  // tells this DataDir from every other of the process (kept logs)
  const std::string dir_;
  const bool fsync_;
  const mode_t file_mode_;
  const mode_t dir_mode_;
  FileSystem& fs_;
  const detail::SafePathWalk walk_;  // owns data.dir's descriptor
  size_t cleaned_ = 0;               // set once by open(), then read-only
  detail::ReplayCounts replayed_;    // likewise
  // data.dir is on a local filesystem (ext4, xfs, btrfs, tmpfs), whose attributes found by a
  // path are current: read_log_since may then know an unchanged log without opening it. Not
  // on NFS and the like, where only an open revalidates what a path names.
  const bool local_attributes_;

  // Diagnostics and hints, updated by const readers too; each is thread-safe on its own.
  mutable detail::LockBindings bindings_;
  mutable detail::DamageReporter damage_;
  mutable detail::LogEnds log_ends_;
  mutable detail::GroupSync sync_;
};

}  // namespace kagi::store
