// store/detail/kept_log.hpp — the log a writer last read or appended to under an exclusive
// guard, kept open by its thread, so that a post usually opens its board's log not at all.
//
// A read of a log under an exclusive guard (DataDir::read_log_since) opens it read-write and
// leaves the descriptor here with the cursor it verified; an append under the *same grant* (the
// same lock name and epoch: the lock was held without a break since the read, so no
// cooperating writer touched the log) takes it back instead of opening the path again, and
// leaves it here again after writing. kKeptPerThread slots per thread, one per log, the least
// recently kept replaced first: a request reads and appends on one thread, and a thread serving
// posts to several boards keeps each board's log (with one slot, every post to another board
// than the thread's last opened and closed its log).
//
// Under a later grant the descriptor is used again only by a read, and only after one statx of
// the path (without following a symlink) finds the very file it holds open (DataDir, on local
// filesystems, where attributes are never stale): the open pins its inode, so the same device
// and inode number mean the same file. A log replaced or moved away (rewrite_log, remove, an
// operator's mv, a hard-linked backup of the old file) is another file there: the descriptor is
// closed and the path opened as usual.
//
// Under the same grant, the append fstats the kept descriptor (without times: store/fs.hpp) and
// trusts the read's cursor while the file's size is the cursor's end; it refuses the
// descriptor (opening the path as usual) when the file is no longer linked (a rewrite_log or remove
// replaced it, even one made by another thread under a wrong lock). Under a later grant, the read's
// statx of the path must find the same file with the same owner, group and mode as when it was
// opened: a `chmod a-w` or a `chown` (which an open read-write descriptor would ignore) makes the
// path be opened again, and read read-only if it refuses writes. The cursor is only a hint for
// where whole records end, checked like every other hint (find_log_end). What is gained is the path
// walk (openat2) and the close of each post.
//
// Only on local filesystems does the append keep its descriptor for later grants (the
// AppendContext says so): elsewhere no read would use it again. A kept descriptor holds its
// file open: a log removed or replaced while a thread keeps it stays allocated until that thread
// next reads or appends to that path under an exclusive guard, keeps kKeptPerThread other logs
// after it, or ends (at most kKeptPerThread files per worker thread), and a filesystem holding
// kept logs cannot be remounted read-only meanwhile.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/lock/guard.hpp>
#include <kagi/store/log_cursor.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

// Who may write a file, as a stat shows it. A descriptor opened read-write keeps writing after a
// chmod or chown, so a kept one is used again only while this is what it was.
struct FileAccess {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool operator==(const FileAccess&) const = default;
};

inline FileAccess access_of(const struct stat& st) { return {st.st_mode, st.st_uid, st.st_gid}; }

// A kept log's open file. (Which store, path and grant it was kept for, the slot holds.)
struct KeptLog {
  util::UniqueFd fd;    // opened O_RDWR (by the read or the append)
  LogCursor cursor;     // where whole records were last seen to end (names the file, too)
  FileAccess access{};  // the file's, when the descriptor was opened (it writes regardless)
};

// Logs one thread keeps open at most.
inline constexpr size_t kKeptPerThread = 8;

// Whether a log read under `guard` may be kept: an exclusive grant the lock layer tells apart
// from every other grant of its name (a nonzero epoch). That it is held, the caller checked.
bool keepable(const lock::Guard& guard);

// Leaves `log` of (store, path) in this thread's slot for that log as kept under the grant `guard`
// holds: the slot it had, else a free one, else the least recently kept (closing what it held).
// The slot's strings are reused: no allocation per post to a log kept before.
void keep_log(uint64_t store, std::string_view path, const lock::Guard& guard, KeptLog log);

// Reads through `fd` stop updating its file's access time, where the process owns the file (a
// hint: nothing changes otherwise). For descriptors that are kept and read many times.
void add_no_atime(int fd);

// This thread's kept log of (store, path), moved out, the slot left empty, whatever grant it was
// kept under; `*same_grant` says whether that is the grant `guard` holds now (the lock was held
// without a break since). One kept under another grant may be used only after checking that
// the path still names the file it holds open; dropped, it closes.
std::optional<KeptLog> take_kept_log(uint64_t store, std::string_view path,
                                     const lock::Guard& guard, bool* same_grant);

// Closes this thread's kept log of (store, path), if any (the path is about to name another file).
void drop_kept_log(uint64_t store, std::string_view path);

// How many logs this thread keeps open now (for tests).
size_t kept_logs();

}  // namespace kagi::store::detail
