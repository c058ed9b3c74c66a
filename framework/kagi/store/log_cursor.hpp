// store/log_cursor.hpp — where a reader or appender of an append-only log stopped
// (LogCursor), what DataStore::read_log_since() hands back (LogTail), and the record limit.
//
// Kept apart from data_dir.hpp so that the store's internals can pass cursors around without
// the whole DataDir; data_dir.hpp includes it, so users see no difference.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kagi::store {

// The largest log record append() takes, on every backend (Errc::kTooLarge above it): a log
// is for many small records.
inline constexpr size_t kMaxRecord = 16u << 20;

// Where a reader (or appender) of a log stopped. Opaque to callers: each backend fills its own
// fields and the others stay 0.
//
// files: the file's identity and the end of the last whole record it saw, with that record's
// frame header. The birth time (where the filesystem keeps one) and the header, read again, are
// checked before the cursor is trusted, so a log replaced by rewrite_log() is noticed even when
// the new file reuses the old inode number. With the change time as well, a log found by its
// path with the same identity, change time and size as the cursor's is known unchanged without
// opening it (DataDir::read_log_since, on local filesystems).
// postgres: the log's generation (new at every rewrite_log) and the last sequence number seen.
struct LogCursor {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t birth_ns = 0;      // 0: the filesystem does not say
  uint64_t end = 0;          // just past the last whole record seen; 0: nothing seen yet
  uint64_t last_start = 0;   // where that record's frame starts; 0: no record (an empty log)
  uint64_t last_header = 0;  // its 8-byte frame header (length and CRC-32C)
  int64_t ctime_ns = 0;      // the file's change time when it was read; 0: unknown
  int64_t generation = 0;    // postgres: kagi_logs.generation; 0: nothing seen yet
  int64_t seq = 0;           // postgres: the last record's kagi_log_records.seq
};

// What read_log_since() found.
struct LogTail {
  bool restarted = false;            // the cursor did not hold: `records` is the whole log
  std::vector<std::string> records;  // oldest first
};

}  // namespace kagi::store
