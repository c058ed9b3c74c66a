// lock/detail/dir_lock.hpp — the `dir` backend's locks on a (possibly shared) filesystem:
// lock directories with owner records, leases, safe stale takeover and fencing tokens, made
// only of operations every filesystem does atomically on its server (mkdir, rename, symlink,
// unlink, rmdir). No threads and no waiting here: one call is one attempt; the backend
// (dir_backend.cpp) queues threads, waits with back-off and renews leases.
//
// Layout under `root` (<locks.dir>/dirlocks), for a name whose file name is B:
//
//   B.d/                    the lock directory; exists while the name is held
//     x.<nonce>.<expiry>.<token>   an exclusive holder's owner record (a symlink)
//     s.<nonce>.<expiry>.0         one per process holding the name shared
//   B.t/<n>/                the fencing tokens drawn: one folder per token, made by mkdir
//   B.n                     older versions' fencing counter (its size is the tokens' floor)
//   B.w/                    writer intent: one entry per process waiting to write
//   .stage/                 each process's lock directories while they are being made
//   .domain                 the lock domain's id (lock/lock_domain.hpp)
//
// The owner record is a symlink whose target is the text of the record (host, boot id, pid,
// process start time, request id, route, acquired-at, lease): made with its content in one
// call, read in one call, never followed. Its *name* carries what changes: a random nonce
// (unique per grant), the lease expiry (wall ms) and the fencing token. Every change of
// state is a rename or an unlink of an exact name, which exactly one caller can win: that is
// what makes takeover safe (docs/LOCKING.md, "The dir backend", has the protocol and the
// argument).
//
// Thread-safe (no mutable state but counters).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::lock::dirlock {

// The wall clock in ms since the Unix epoch (what lease expiries are written in). Only what
// another host must read is in wall time (an entry's expiry, an intent's); every decision a
// process makes about its own records (when to renew, when to re-post an intent) is on the
// steady clock, so a step of the wall clock moves no lease.
int64_t wall_ms();
// Tests: moves wall_ms() by `offset_ms` (a clock stepped by NTP or by hand), for this process.
void shift_wall_clock_for_tests(int64_t offset_ms);

// Who holds: what an owner record says, beside what its entry name says.
struct Owner {
  std::string name;   // the full lock name (a hashed file name is checked against it)
  std::string host;   // locks.dir_host_id
  std::string boot;   // /proc/sys/kernel/random/boot_id of the holder's host
  std::string pidns;  // the holder's pid namespace (pid_namespace()); empty: unknown
  int pid = 0;
  uint64_t start = 0;   // the process's start time (clock ticks after boot, /proc/PID/stat)
  std::string request;  // request id
  std::string route;    // "METHOD /path"
  int64_t at_ms = 0;    // acquired at (wall ms)
  int64_t lease_ms = 0;
};

// One entry of a lock directory, as its name says.
struct Entry {
  std::string file;  // the entry's name in the lock directory
  Mode mode = Mode::kExclusive;
  uint64_t nonce = 0;
  int64_t expiry_ms = 0;
  uint64_t token = 0;  // exclusive: the fencing token; 0 for readers (and an old kagi's
                       // exclusive record not renewed yet: then the counter file has it)
};

// Parses "x.<16 hex>.<expiry>.<token>" / "s.…"; false for anything else.
bool parse_entry(std::string_view file, Entry& out);
std::string entry_file(const Entry& e);

// The record's text and back (fields escaped, so a route with a newline cannot forge one).
std::string format_owner(const Owner& o);
bool parse_owner(std::string_view text, Owner& out);

// A lock this process holds: enough to renew, verify and release it by exact name.
struct Hold {
  std::string name;
  std::string dir;  // root/B.d
  Entry entry;      // current name of our record in `dir`
};

struct Config {
  std::string root;  // <locks.dir>/dirlocks
  std::string host;  // this host's id
  std::chrono::milliseconds lease{10000};
  std::chrono::milliseconds max_skew{30000};
};

// The record behind an entry of the lock directory `dir` (false if it is gone or unreadable).
bool read_owner_at(std::string_view dir, const Entry& e, Owner& out);

// Every lock directory under `root` and its entries, each record read (the admin page).
struct Listed {
  std::string dir;  // "B.d"
  Entry entry;
  Owner owner;
  bool owner_read = false;
};
std::vector<Listed> list_all(const std::string& root);

// Removes the record `dir`/`file` under `root` (as list_all names it) if it is still there
// under that very name and its lease expired more than `max_skew` ago by this host's clock
// (the margin of takeover rule 2: a holder whose clock runs behind ours by up to max_skew is
// still renewing), then its folder if empty. Errc::kReleased if it is gone or was renewed
// meanwhile (its name changed); EAGAIN if its lease has not expired by more than the margin;
// EINVAL for a name that is not a record. An admin's "break stale lock".
std::error_code break_record(const std::string& root, std::string_view dir, std::string_view file,
                             std::chrono::milliseconds max_skew);

// The lock domain's id, stored in root/.domain: made once, by whoever comes first (root is
// created if missing). Every host that mounts the folder reads the same id.
std::string domain_id(const std::string& root, std::error_code& ec);

// This host's boot id, and this process's pid namespace (the inode number of
// /proc/self/ns/pid, in decimal; empty if it cannot be read). A pid means something only to
// a process of the same host, boot and pid namespace: containers on one kernel share the boot
// id but not their pids.
const std::string& boot_id();
const std::string& pid_namespace();

// What /proc says about a pid of this pid namespace. Only evidence that the process is not
// there (ENOENT/ESRCH, confirmed by kill(pid, 0) failing with ESRCH, or a zombie) is kGone;
// any other failure to look (EACCES, EMFILE, ENFILE, an unreadable line) is kUnknown, which
// a caller must treat as alive.
struct ProcessState {
  enum Kind { kRunning, kGone, kUnknown } kind = kUnknown;
  uint64_t start = 0;  // kRunning: its start time (clock ticks after boot, /proc/PID/stat)
};
ProcessState probe_process(int pid);

// True if the holder `o` is, for certain, not running: it was written on this very host (host
// id, boot id and pid namespace all equal to ours, none unknown) by a pid that is gone or now
// runs another process (its start time differs). False whenever that cannot be known.
bool holder_is_dead(const Owner& o, std::string_view host, std::string* why = nullptr);

// A stage folder's name, "<host>.<pidns>.<pid>.<start>.<n>", read from the right (a host id
// may hold dots): false unless the last four fields are numbers and the host is not empty.
struct StageName {
  std::string host;
  std::string pidns;
  int pid = 0;
  uint64_t start = 0;
};
bool parse_stage_name(std::string_view file, StageName& out);

class DirLocks {
 public:
  // Creates root and root/.stage if missing and removes this host's stage folders of dead
  // processes (same host id, boot and pid namespace, and a pid that is gone: holder_is_dead's
  // rule). A folder is first renamed to a private name, so it cannot be emptied while its
  // maker renames it into place as a lock directory (one of the two renames wins). Throws
  // std::system_error if root cannot be made.
  explicit DirLocks(Config config);
  DirLocks(const DirLocks&) = delete;
  DirLocks& operator=(const DirLocks&) = delete;

  const Config& config() const { return config_; }
  std::string lock_dir(std::string_view name) const;
  // The fencing tokens drawn for `name`: a folder of numbered folders (B.t/<n>), each made by
  // exactly one mkdir. B.n (counter_file) is the counter of older kagi versions (one byte
  // appended per grant): its size is the floor the numbered tokens start above.
  std::string token_dir(std::string_view name) const;
  std::string counter_file(std::string_view name) const;
  // Draws a fencing token for `name` larger than every token drawn before it that this
  // process's listing shows, and larger than `floor`: mkdir of B.t/<max + 1>, which exactly
  // one caller wins (the others go higher). Old entries are pruned on the way.
  std::error_code draw_token(std::string_view name, uint64_t floor, uint64_t& token);
  // The largest token drawn for `name` so far (0 if none), read through a fresh descriptor.
  uint64_t latest_token(std::string_view name) const;
  std::string intent_dir(std::string_view name) const;

  // One attempt at `name` in `mode` for `who`. Empty error and `out` filled: held (exclusive:
  // with its fencing token, which is in the record's name from the moment the record is
  // visible, and larger than the token of every holder before it: drawn before the record is
  // published, and drawn again, the record renamed to it, if a larger one was drawn
  // meanwhile). Errc::kTimeout: somebody holds it (or, shared, a writer waits and
  // `respect_intent`); the caller looks for stale holders (entries, is_stale, remove_stale)
  // and tries again later. Another error: the filesystem failed (errno, with `why`).
  std::error_code try_lock(std::string_view name, Mode mode, const HolderInfo& who,
                           bool respect_intent, Hold& out, std::string* why);
  // Moves the lease on: renames our record to a later expiry (and, once known, the token).
  // Errc::kFenceLost if our record is gone (taken over), which is final.
  std::error_code renew(Hold& hold);
  // Removes our record and, if that leaves the lock directory empty, the directory. A record
  // that is gone already (taken over) is left alone: someone else's lock is never touched.
  // ESTALE (NFS: the directory was removed or replaced on the server) is tried once more by
  // path and then taken for "gone", as ENOENT is, here and in remove_stale/break_record.
  void release(const Hold& hold);

  // The entries of `name`'s lock directory (empty if it does not exist). Names that are not
  // records (a damaged name, another program's file) go to `unknown` if it is given: they
  // would keep the lock directory from ever being free (a rename onto it fails), so they are
  // judged by unknown_stale_reason and removed with remove_unknown.
  std::vector<Entry> entries(std::string_view name,
                             std::vector<std::string>* unknown = nullptr) const;
  // The record behind an entry (false if it is gone or not ours to read).
  bool read_owner(std::string_view dir, const Entry& e, Owner& out) const {
    return read_owner_at(dir, e, out);
  }

  // Why `e` (of `name`'s lock dir) is stale now, or empty if it is not. `unchanged_for` is how
  // long this process has seen the very same entry name (no renewal): the holder's lease (the
  // one in its record, not this process's) without a renewal is stale on any clock; a record
  // that cannot be read or parsed, this process's lease plus max_skew. Also stale: an expiry
  // more than max_skew in the past by this host's wall clock, and a holder holder_is_dead
  // says is dead.
  std::string stale_reason(std::string_view name, const Entry& e,
                           std::chrono::steady_clock::duration unchanged_for) const;
  // Why an entry whose name is not a record is stale, or empty: nothing renews it, so once
  // unchanged for this process's lease plus max_skew.
  std::string unknown_stale_reason(std::chrono::steady_clock::duration unchanged_for) const;
  // Removes the entry `file` that is not a record (unlink; rmdir if it is an empty folder),
  // then the lock directory if that left it empty. True if this call removed it.
  bool remove_unknown(std::string_view name, const std::string& file);
  // Removes exactly entry `e` from `name`'s lock directory (an unlink of its exact name: of
  // several callers at most one succeeds, and an entry renewed or re-created meanwhile has
  // another name, so it is never removed), then the directory if that left it empty. True if
  // this call removed the entry.
  bool remove_stale(std::string_view name, const Entry& e);

  // Writer intent (liveness only: readers stop joining while a writer waits).
  std::error_code add_intent(std::string_view name, uint64_t nonce, int64_t expiry_ms);
  void remove_intent(std::string_view name, uint64_t nonce, int64_t expiry_ms);
  // True if a writer waits for `name` (expired intents are removed on the way).
  bool writer_waiting(std::string_view name);

 private:
  std::string stage_path();
  std::error_code join_shared(const std::string& dir, const Entry& e, const std::string& target,
                              bool& joined);

  const Config config_;
  const std::string stage_dir_;
  // This process's start time, read once: a DirLocks is made after fork() (as the whole lock
  // service is), so it is this process's and not a parent's.
  const uint64_t my_start_;
  const std::string stage_prefix_;  // "<host>.<pidns>.<pid>.<start>."
  std::atomic<uint64_t> stage_seq_{0};
};

}  // namespace kagi::lock::dirlock
