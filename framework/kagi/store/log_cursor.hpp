// store/log_cursor.hpp — where a reader or appender of an append-only log stopped
// (LogCursor), and what DataDir::read_log_since() hands back (LogTail).
//
// Kept apart from data_dir.hpp so that the store's internals can pass cursors around without
// the whole DataDir; data_dir.hpp includes it, so users see no difference.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace kagi::store
