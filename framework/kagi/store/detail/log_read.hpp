// store/detail/log_read.hpp — decoding an open log for readers: all its records, or those past
// a cursor. Readers may hold only a shared lock, so they never write: a torn tail is left for
// the next append to cut, and damaged spans are skipped (and reported).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/store/detail/damage_report.hpp>
#include <kagi/store/detail/group_sync.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/log_cursor.hpp>
#include <kagi/store/status.hpp>

namespace kagi::store::detail {

// Which file a read saw and how far: what must be durable before anyone is shown it.
struct ReadExtent {
  FileId id;
  // The end of the last intact record the read returned (0: none). A torn tail past it is not
  // shown, and must not count as made durable: a writer cuts it and writes its record there.
  uint64_t size = 0;
  struct stat st {};  // the file's status the read went by
};

// The intact records of the open log `fd`, oldest first, at most the last `last_n`. Errors name
// "read_log" and `path`: a failed read, or Errc::kCorrupt for a file that is not a kagi log.
Result<std::vector<std::string>> read_records(FileSystem& fs, int fd, std::string_view path,
                                              size_t last_n, DamageReporter& damage,
                                              ReadExtent* seen);

// A status of an open file taken just before by other means (its path, matched to it).
struct FileStatus {
  struct stat st {};
  int64_t birth_ns = 0;
};

// The records of the open log `fd` past `cursor`, and the cursor moved past them; the whole
// log with `restarted` set when the cursor no longer holds. On error the cursor is unchanged.
// `now`: the file's status, if the caller has it (spares an fstat). `held_since`: the caller's
// exclusive lock was held without a break since `cursor` was verified (log_unchanged_since).
Result<LogTail> read_records_since(FileSystem& fs, int fd, std::string_view path, LogCursor& cursor,
                                   DamageReporter& damage, ReadExtent* seen,
                                   const FileStatus* now = nullptr, bool held_since = false);

}  // namespace kagi::store::detail
