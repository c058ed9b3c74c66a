// store/detail/temp_cleanup.hpp — removing the temp files of commits whose process died
// between creating the temp file and renaming it (atomic_commit.hpp names them).
//
// Run once by DataDir::open. A temp file whose process is alive is left alone: another worker
// may be in the middle of a commit.
#pragma once

#include <cstddef>
#include <string>

namespace kagi::store::detail {

// Walks the directory `root_fd` (not closed; at most 32 levels deep, not following symlinks)
// and unlinks every ".kagi-tmp-<pid>-*" whose process is gone, logging each one with `where`
// (data.dir, ending in '/') in front of its path. Returns how many it removed; directories it
// cannot read are skipped.
size_t remove_dead_temp_files(int root_fd, const std::string& where);

}  // namespace kagi::store::detail
