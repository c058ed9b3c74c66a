// store/detail/kept_log.hpp — the log a writer last read or appended to under an exclusive
// guard, kept open by its thread, so that a post usually opens its board's log not at all.
//
// A read of a log under an exclusive guard (DataDir::read_log_since) opens it read-write and
// leaves the descriptor here with the cursor it verified; an append under the *same grant* (the
// same lock name and epoch: the lock was held without a break since the read, so no
// cooperating writer touched the log) takes it back instead of opening the path again, and
// leaves it here again after writing. One slot per thread: a request reads and appends on one
// thread, and whatever else happens (another log read, an append elsewhere) just replaces the
// slot or leaves it unused.
//
// Under a later grant the descriptor is used again only by a read, and only after one statx of
// the path (without following a symlink) finds the very file it holds open (DataDir, on local
// filesystems, where attributes are never stale): the open pins its inode, so the same device
// and inode number mean the same file. A log replaced or moved away (rewrite_log, remove, an
// operator's mv, a hard-linked backup of the old file) is another file there: the descriptor is
// closed and the path opened as usual.
//
// The kept descriptor is trusted for nothing the append does not check again: the append
// fstats it, and refuses it (and opens the path as usual) when the file is no longer linked (a
// rewrite_log or remove replaced it, even one made by another thread under a wrong lock); the
// cursor is only a hint for where whole records end, checked like every other hint
// (find_log_end). What is gained is the path walk (openat2) and the close of each post.
//
// A log removed while a thread keeps it stays allocated until that thread next reads or
// appends to a log under an exclusive guard (or ends): at most one file per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/lock/guard.hpp>
#include <kagi/store/log_cursor.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

struct KeptLog {
  uint64_t store = 0;  // which DataDir (its serial: an address may come back)
  std::string path;
  std::string lock;  // the guard's lock name and epoch: the grant the read was made under
  uint64_t epoch = 0;
  util::UniqueFd fd;  // opened O_RDWR by the read
  LogCursor cursor;   // where the read found whole records to end
};

// Whether a log read under `guard` may be kept: an exclusive grant the lock layer tells apart
// from every other grant of its name (a nonzero epoch). That it is held, the caller checked.
bool keepable(const lock::Guard& guard);

// Leaves `log` in this thread's slot, closing what was kept before.
void keep_log(KeptLog log);

// This thread's kept log of (store, path), if it was kept under the grant `guard` holds now:
// moved out, the slot left empty. A slot kept under another grant is closed and nullopt returned.
std::optional<KeptLog> take_kept_log(uint64_t store, std::string_view path,
                                     const lock::Guard& guard);

// This thread's kept log of (store, path) whatever grant it was kept under, moved out: the
// caller must check that the path still names the file it holds open before using it.
std::optional<KeptLog> take_kept_log_to_check(uint64_t store, std::string_view path);

// Closes this thread's kept log of (store, path), if any (the path is about to name another file).
void drop_kept_log(uint64_t store, std::string_view path);

}  // namespace kagi::store::detail
