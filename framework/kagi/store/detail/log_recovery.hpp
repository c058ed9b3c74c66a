// store/detail/log_recovery.hpp — working out where a log's whole records end: after a crash
// (a torn tail), after other processes appended, after damage in the middle.
//
// Reading a whole log for every append would cost O(log) per record. Instead each DataDir
// remembers, per log, the cursor it verified last (LogEnds), and trusts it only while it
// provably still describes the file (read_past_cursor): then only the bytes past it are read.
// Readers keep cursors too (read_log_since) and read past them the same way.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/log_cursor.hpp>
#include <kagi/store/status.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::store::detail {

// Reads the bytes of the open log `fd` (stat'ed `st`, born `birth_ns`) that lie past the cursor
// `c` into `bytes`, and returns the file offset they start at: `c.end` while the cursor still
// describes the file — the same file, no shorter than the cursor's end, and the cursor's last
// record still in place (its header read again, in the same pread as what follows it: a
// replaced log that reuses the inode number fails here) — else 0, with the whole file read.
// Nothing is read when the file is the one `c` read to its end, unchanged since
// (log_unchanged_since). <0: -errno.
long read_past_cursor(FileSystem& fs, int fd, const struct stat& st, int64_t birth_ns,
                      const LogCursor& c, std::string& bytes, bool held_since = false);

// Is the file `st` (born `birth_ns`), found by the log's path without opening it, the very file
// `c` read to its end, unchanged since? The same identity, birth time, change time and size:
// then no record was appended, cut or rewritten (each changes the size or the change time; a
// rewrite_log is another file). False whenever the cursor lacks what it would take to tell.
//
// `held_since`: the caller's exclusive lock on the log was held without a break since `c` was
// taken (one grant). Then the change time is not asked for (it may be unknown: a writer stats
// without times, fs.hpp): no writer that keeps the locking rule touched the log, and what
// one that breaks it could do unseen is a same-sized rewrite in place within that grant (an
// append changes the size, a rewrite_log the inode and its link count).
bool log_unchanged_since(const struct stat& st, int64_t birth_ns, const LogCursor& c,
                         bool held_since = false);

// Whether two cursors stand at the same place of the same file (the same file identity, end and
// last record).
bool same_place(const LogCursor& a, const LogCursor& b);

// The cursor after `bytes`, read from offset `from` (a record boundary) of the file `st`, of
// which the first `valid` bytes are whole records, the last one `last_payload` bytes long
// (none: the cursor's last record stays `before`'s).
LogCursor cursor_after(const struct stat& st, int64_t birth_ns, const LogCursor& before,
                       uint64_t from, std::string_view bytes, size_t valid,
                       std::optional<size_t> last_payload);

// Where an appender found the whole records of a log to end.
struct LogEnd {
  uint64_t valid_end = 0;      // past the last intact record (0: not even a whole magic)
  uint64_t parsed_from = 0;    // the file offset the `damage` offsets are relative to
  std::vector<Damage> damage;  // damaged spans met on the way (intact records follow each)
};

// Finds the end of the whole records of the open log `fd` (stat'ed `st`, born `birth_ns`),
// reading only what lies past `known` when that cursor still holds (read_past_cursor). Errors
// name "append" and `path`: a failed read, or Errc::kCorrupt for a file that is not a kagi log.
// `held_since`: as for log_unchanged_since.
Status find_log_end(FileSystem& fs, int fd, const struct stat& st, int64_t birth_ns,
                    const LogCursor& known, std::string_view path, LogEnd* end,
                    bool held_since = false);

// What this process verified of each log it appended to: hints for find_log_end, trusted only
// while read_past_cursor finds them holding. Thread-safe; bounded (cleared when full: a hint cache,
// not a registry).
class LogEnds {
 public:
  // The cursor remembered for `path`, or an empty one.
  LogCursor find(const std::string& path) const KAGI_EXCLUDES(mu_);
  void remember(const std::string& path, const LogCursor& cursor) KAGI_EXCLUDES(mu_);
  // After the log was replaced, removed, or an append failed halfway: what was verified no
  // longer applies.
  void forget(std::string_view path) KAGI_EXCLUDES(mu_);

 private:
  mutable util::Mutex mu_;
  std::unordered_map<std::string, LogCursor> ends_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::store::detail
