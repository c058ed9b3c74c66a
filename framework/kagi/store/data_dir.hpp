// store/data_dir.hpp — the data directory (conf data.dir): guarded, crash-safe file storage.
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
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <kagi/lock/guard.hpp>
#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>

namespace kagi::store {

// Where a reader (or appender) of a log stopped: the file's identity and the end of the last
// whole record it saw, with that record's frame header. The birth time (where the filesystem
// keeps one) and the header, read again, are checked before the cursor is trusted, so a log
// replaced by rewrite_log() is noticed even when the new file reuses the old inode number.
struct LogCursor {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t birth_ns = 0;      // 0: the filesystem does not say
  uint64_t end = 0;          // just past the last whole record seen; 0: nothing seen yet
  uint64_t last_start = 0;   // where that record's frame starts; 0: no record (an empty log)
  uint64_t last_header = 0;  // its 8-byte frame header (length and CRC-32C)
};

// What read_log_since() found.
struct LogTail {
  bool restarted = false;            // the cursor did not hold: `records` is the whole log
  std::vector<std::string> records;  // oldest first
};

struct DataOptions {
  std::string dir = "var/data";  // data.dir: created if missing
  bool fsync = true;             // data.fsync: "always" (true) | "never" (false)
  bool group_readable = false;   // data.group_readable: new files 0640 / dirs 0750, not 0600 / 0700
};

class DataDir {
 public:
  // Creates options.dir if missing (with the directory mode above), opens it, and removes temp
  // files left by processes that died mid-commit. Returns null and sets `ec` on failure. `fs` must
  // outlive the DataDir (tests pass a FaultFs; everyone else the real one).
  static std::unique_ptr<DataDir> open(const DataOptions& options, std::error_code& ec);
  static std::unique_ptr<DataDir> open(const DataOptions& options, FileSystem& fs,
                                       std::error_code& ec);

  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;
  ~DataDir();

  // --- whole files ---------------------------------------------------------------------

  // The file's bytes. A missing file reads as empty: for apps "no posts yet" and "empty"
  // are the same state, and a first commit creates it. Use exists() to tell them apart.
  Result<std::string> read(const lock::Guard& guard, std::string_view path) const;
  Result<bool> exists(const lock::Guard& guard, std::string_view path) const;

  // Atomically replaces the file's content with `bytes` (creating it and its parent
  // directories if needed). On error the old content is intact.
  Status commit(const lock::ExclusiveGuard& guard, std::string_view path, std::string_view bytes);

  // Removes the file (durably with fsync on). Removing a missing file is not an error.
  Status remove(const lock::ExclusiveGuard& guard, std::string_view path);

  // --- append-only logs ------------------------------------------------------------------

  // Appends one record (any bytes, up to 16 MiB) to the log, creating it if needed. When
  // append() returns ok, the record survives a crash (with fsync on, a power loss too).
  Status append(const lock::ExclusiveGuard& guard, std::string_view path, std::string_view record);

  // Atomically replaces the whole log with `records` (compaction, deletions): a crash leaves
  // the old log or the new one. Same fencing and errors as commit().
  Status rewrite_log(const lock::ExclusiveGuard& guard, std::string_view path,
                     const std::vector<std::string>& records);

  // The log's records, oldest first; at most the last `last_n`. A torn tail (a crash
  // mid-append) is skipped; so is a damaged span in the middle (reported once per process),
  // and the intact records after it are returned. A missing log has no records. A file that is not
  // a kagi log is refused (Errc::kCorrupt) rather than misread.
  Result<std::vector<std::string>> read_log(
      const lock::Guard& guard, std::string_view path,
      size_t last_n = std::numeric_limits<size_t>::max()) const;

  // The records appended since `cursor` (from an earlier call; a default cursor reads the
  // whole log), and the cursor moved past them. When the log was replaced, shrank or
  // vanished since, the whole log is returned with `restarted` set: the caller starts over.
  // This makes a reader that keeps what it decoded cost O(new records) per read instead of
  // O(log). On error the cursor is unchanged.
  Result<LogTail> read_log_since(const lock::Guard& guard, std::string_view path,
                                 LogCursor& cursor) const;

  const std::string& dir() const { return dir_; }
  bool fsync_enabled() const { return fsync_; }
  // The modes new files and folders get (0600 / 0700, or 0640 / 0750 with group_readable);
  // for code that creates folders below dir() itself (the chat's watcher).
  mode_t file_mode() const { return file_mode_; }
  mode_t dir_mode() const { return dir_mode_; }
  // Temp files removed by open() (left by processes that died mid-commit).
  size_t cleaned_temp_files() const { return cleaned_; }
  // How many times a file was touched under a different lock than before (each is logged).
  uint64_t lock_mismatches() const { return mismatches_.load(std::memory_order_relaxed); }
  // Damaged spans found in the middle of logs by this DataDir (each counted and logged once;
  // also in store::damage_log()).
  uint64_t damaged_spans() const { return damaged_.load(std::memory_order_relaxed); }

 private:
  DataDir(std::string dir, int root_fd, const DataOptions& options, FileSystem& fs);

  // Opens the directory holding `segments.back()`; returns its fd (root_fd_ for top-level
  // files: not to be closed) or -errno. With `create`, missing directories are made.
  // Checks that the guard holds its lock and remembers (or compares) the lock protecting
  // `path`.
  Status check_guard(std::string_view op, std::string_view path, const lock::Guard& guard) const;

  int open_parent(const std::vector<std::string_view>& segments, bool create,
                  std::string* failed_step) const;
  void close_parent(int fd) const;
  // `path` opened by the kernel in one call (FileSystem::open_beneath) when it can: the fd,
  // -ENOENT, or kWalk when the segment-by-segment walk must decide (unsupported, a symlink,
  // any other error: the walk also names the failing step).
  static constexpr int kWalk = -100000;
  int open_direct(std::string_view path, int flags) const;
  // Opens `path` read-only: the fd, -ENOENT if it or a directory on the way is missing, or
  // another -errno with `failed_step` set.
  int open_readonly(const std::vector<std::string_view>& segments, std::string_view path,
                    std::string* failed_step) const;

  const std::string dir_;
  const int root_fd_;
  const bool fsync_;
  const mode_t file_mode_;
  const mode_t dir_mode_;
  FileSystem& fs_;
  mutable std::atomic<bool> direct_open_{true};  // false once open_beneath said ENOSYS/EPERM
  size_t cleaned_ = 0;                           // set once by open(), then read-only

  // The lock each file was first used under (bounded: cleared when full; it is a
  // diagnostic, not a rule).
  struct Binding {
    std::string lock;
    bool warned = false;  // a mismatch on this file was logged already
  };
  mutable std::mutex bindings_mu_;
  mutable std::unordered_map<std::string, Binding> bindings_;  // guarded by bindings_mu_
  mutable std::atomic<uint64_t> mismatches_{0};

  // Reports each damaged span of the log `st` (`spans` relative to file offset `from`) once:
  // an error log line naming file and offset, damaged_spans(), store::damage_log().
  void report_damage(std::string_view op, std::string_view path, const struct stat& st,
                     uint64_t from, const std::vector<detail::Damage>& spans) const;

  // The damaged spans reported already ("dev:ino:offset"; bounded: cleared when full, which
  // at worst reports a span again).
  mutable std::mutex damage_mu_;
  mutable std::unordered_set<std::string> reported_;  // guarded by damage_mu_
  mutable std::atomic<uint64_t> damaged_{0};

  // Logs this process has appended to: where their whole records end. An entry is only a
  // hint: it is used when the cursor still holds (log_cursor_holds), and records past its
  // end (appended by other processes) are verified before an append.
  mutable std::mutex logs_mu_;
  std::unordered_map<std::string, LogCursor> logs_;  // guarded by logs_mu_
};

}  // namespace kagi::store
