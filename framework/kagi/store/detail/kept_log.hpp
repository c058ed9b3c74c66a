// store/detail/kept_log.hpp — the log a writer just read under its exclusive guard, kept open
// for the append that usually follows, so that a post opens its board's log once, not twice.
//
// A read of a log under an exclusive guard (DataDir::read_log_since) opens it read-write and
// leaves the descriptor here with the cursor it verified; an append under the *same grant* (the
// same lock name and epoch: the lock was held without a break since the read, so no
// cooperating writer touched the log) takes it back instead of opening the path again. One slot
// per thread: a request reads and appends on one thread, and whatever else happens (another
// log read, an append elsewhere) just replaces the slot or leaves it unused.
//
// The kept descriptor is trusted for nothing the append does not check again: the append
// fstats it, and refuses it (and opens the path as usual) when the file is no longer linked (a
// rewrite_log or remove replaced it, even one made by another thread under a wrong lock); the
// cursor is only a hint for where whole records end, checked like every other hint
// (find_log_end). What is gained is the second path walk (openat2) and its close.
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

// Closes this thread's kept log of (store, path), if any (the path is about to name another file).
void drop_kept_log(uint64_t store, std::string_view path);

}  // namespace kagi::store::detail
