// apps/fsck/fsck.hpp — what kagi-fsck does: find the append-only logs under data.dir, report
// the damage in each, and rewrite a damaged log to hold only its intact records.
//
// A log's damage is what store/detail/log_format.hpp calls a damaged span: bytes that hold no
// intact record but are followed by intact records (a flipped bit, a bad sector). The apps
// already skip such spans and keep serving the records after them (docs/STORAGE.md); repair
// removes them from the file, after a backup, so that the damage stops being reported. A torn
// tail (a crash mid-append) is not damage: the next append drops it.
//
// Scanning takes no lock: commits are atomic renames and appends only grow a log, so a scan
// sees a whole old or new file, at worst with a torn tail still being written. Repair takes
// the lock the apps use for the file (app_lock_for) while it backs up, reads and rewrites it,
// so it is safe with the site running; a log no app lock is known for is repaired only with
// `offline` (the operator says the site is stopped).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/detail/log_format.hpp>

namespace kagi::apps::fsck {

struct LogReport {
  std::string path;        // relative to data.dir
  uint64_t bytes = 0;      // the file's size when scanned
  uint64_t records = 0;    // intact records (kept by readers and by a repair)
  uint64_t torn_tail = 0;  // bytes after the last intact record (dropped by the next append)
  std::vector<store::detail::Damage> damage;  // file offsets; records in them are lost
  bool damaged() const { return !damage.empty(); }
  uint64_t damaged_bytes() const;
};

// Walks `data_dir` (not following symlinks, 32 levels deep at most) and scans every file that
// starts with the log magic, except the backups repair() wrote (names containing ".bak-").
// Files it cannot read are named in `errors`. Sorted by path.
std::vector<LogReport> scan(const std::string& data_dir, std::vector<std::string>& errors);

// The lock the sample apps take for `path` ("bbs/boards/x.log" → "bbs/board/x",
// "chat/rooms/x.log" → "chat/room/x"), or nothing for a log no app is known to write.
std::optional<std::string> app_lock_for(std::string_view path);

struct RepairResult {
  std::string backup;    // the backup copy written beside the log (relative to data.dir)
  uint64_t kept = 0;     // records in the rewritten log
  uint64_t dropped = 0;  // damaged bytes removed
};

// Under `guard` (the file's lock, exclusive): copies the log byte for byte to
// "<path>.bak-<stamp>" (atomically, as every commit), then rewrites the log with its intact
// records (DataDir::rewrite_log: atomic, the old file stays until the rename). A log that
// turns out undamaged when read under the lock is left alone (kept = its records, no backup).
store::Result<RepairResult> repair(store::DataDir& data, const lock::ExclusiveGuard& guard,
                                   std::string_view path, std::string_view stamp);

}  // namespace kagi::apps::fsck
