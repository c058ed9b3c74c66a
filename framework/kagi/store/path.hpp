// store/path.hpp — the lexical rules a data path must pass before it touches the disk.
//
// A data path is relative to data.dir: segments separated by '/', none empty, none "." or
// "..", no NUL or control bytes, no segment starting with ".kagi-" (reserved for the
// layer's temp files), at most kMaxPath bytes and kMaxSegment per segment. Symlinks are
// handled at open time, not here: every segment is opened with O_NOFOLLOW under the
// directory fd of its parent, so a symlink anywhere below data.dir is refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::store {

inline constexpr size_t kMaxPath = 1024;
inline constexpr size_t kMaxSegment = 255;
inline constexpr std::string_view kReservedPrefix = ".kagi-";

// Returns nullptr if `path` is acceptable, else why not (a static string, e.g.
// "'..' segment"), for an error message.
const char* path_problem(std::string_view path);

// What DataStore::watch(folder) reports paths under: "" for everything, else the folder with
// a trailing '/'. Null if `folder` is not an acceptable path.
std::optional<std::string> folder_prefix(std::string_view folder);

// Splits an acceptable path into its segments.
std::vector<std::string_view> path_segments(std::string_view path);

}  // namespace kagi::store
