// store/detail/log_append.hpp — appending one record to a log so that only a record whose
// append had not returned can be lost.
//
// The steps (log_append.cpp, one function each): open the log (or take the descriptor the
// writer's read under the same grant kept open, store/detail/kept_log.hpp), creating it and its
// folders if missing; find where its whole records end (log_recovery.hpp); check the fence; cut a
// torn tail; write the framed record at the end, undone if the write or fsync fails; remember the
// new end for the next append.
//
// With fsync on and a DurableScope open on this thread (store/durable_scope.hpp), an append to
// an existing log does not flush: the scope flushes it with other requests' records once the
// caller has released its lock. A log this append creates is flushed at once, with its folder.
#pragma once

#include <sys/types.h>

#include <string_view>

#include <kagi/lock/guard.hpp>
#include <kagi/store/detail/damage_report.hpp>
#include <kagi/store/detail/group_sync.hpp>
#include <kagi/store/detail/log_recovery.hpp>
#include <kagi/store/detail/safe_path_walk.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>

namespace kagi::store::detail {

// What an append works with: the DataDir's pieces, borrowed for the call.
struct AppendContext {
  FileSystem& fs;
  const SafePathWalk& walk;
  LogEnds& ends;
  DamageReporter& damage;
  mode_t file_mode;  // of a log this append creates
  bool fsync;        // make the record (and a new log's directory entry) durable
  GroupSync& group;  // where a deferred flush goes, and what is known durable
  uint64_t store;    // the DataDir's serial: whose kept logs (kept_log.hpp) are this one's
  bool keep_open;    // keep the descriptor for later grants (local filesystems: kept_log.hpp)
};

// Appends `record` to the log `path` (already checked: a safe path, a held guard). Errors name
// "append", `path` and the step; on error the log holds what it held before (a torn tail
// aside, which a stale holder never cuts: the fence comes first).
Status append_record(const AppendContext& ctx, const lock::Guard& guard, std::string_view path,
                     std::string_view record);

}  // namespace kagi::store::detail
