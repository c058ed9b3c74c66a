// store/detail/folder_feed.hpp — DataDir::watch(): an inotify watch on one folder of data.dir.
//
// An append is IN_MODIFY; a commit or a compaction renames a new file over the old one
// (IN_MOVED_TO); a first write is IN_CREATE. Only this host's processes are seen (inotify is
// local), which is all that share a data.dir on local disk.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <system_error>

#include <kagi/store/data_store.hpp>

namespace kagi::store::detail {

// Watches `dir` (created if missing, with `dir_mode`); changed paths are reported as
// `prefix` + file name. Null with `ec` set on failure.
std::unique_ptr<ChangeFeed> watch_folder(std::string dir, std::string prefix, mode_t dir_mode,
                                         std::error_code& ec);

}  // namespace kagi::store::detail
