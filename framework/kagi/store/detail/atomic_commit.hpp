// store/detail/atomic_commit.hpp — replacing a file's content so that a crash at any moment
// leaves the old bytes or the new ones, never a mix: write a temp file beside the target,
// fsync it, close it, check the fence, rename it over the target, fsync the directory.
//
// The temp files are named ".kagi-tmp-<pid>-<n>" (kTempPrefix): the pid lets the start-up
// cleanup (temp_cleanup.hpp) spare the files of live processes, and ".kagi-" is a prefix no
// data path may use (store/path.hpp).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include <kagi/lock/guard.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>

namespace kagi::store::detail {

inline constexpr std::string_view kTempPrefix = ".kagi-tmp-";

// A temp name no other commit of any DataDir of this process, nor of any live process, uses.
std::string temp_name();

// How a commit is made: the filesystem, the mode of the new file, and whether to fsync.
struct CommitOptions {
  FileSystem& fs;
  mode_t file_mode;
  bool fsync;
};

// Replaces `leaf` in the directory `dir_fd` with `bytes`. Right before the rename the guard is
// asked whether it still holds its lock (lock::Guard::verify); if not, nothing is applied.
// Errors name "commit", `path` and the step; on any error before the rename the target is
// untouched and the temp file removed. A failed directory fsync after the rename is reported
// too: the new content is in place, its durability unknown.
Status atomic_commit(const CommitOptions& options, int dir_fd, std::string_view leaf,
                     std::string_view bytes, const lock::Guard& guard, std::string_view path);

}  // namespace kagi::store::detail
