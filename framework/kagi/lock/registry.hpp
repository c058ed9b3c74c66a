// lock/registry.hpp — the status registry: what every process on the host holds and waits
// for right now, readable by any worker (the admin page, kagi-locks).
//
// Layout: one file per process, <locks.dir>/registry/<pid>-<start ns>.reg, mmap'd shared:
// a 64-byte header then fixed 512-byte slots. Each slot is a seqlock (an odd sequence number
// means "being written"; readers retry until they see the same even number before and after
// copying), so writers never wait for readers and readers never see a torn record. The owner
// holds flock(LOCK_EX) on its file for its whole life; a reader that can take the flock knows
// the owner died and removes the file.
//
// Revoking from another process (the admin page): each slot also has a revoke word outside
// the seqlock. request_revoke() stores there the sequence number of the record it saw; the
// owner's watchdog (lock/lock_service.hpp) revokes the lock if that still matches the slot's
// current sequence number. A record that changed since (released, slot reused) has a newer
// sequence number, so a stale request never revokes someone else's lock.
//
// Writing is cheap (a free slot taken with one compare-and-swap, then a copy of the words up
// to each field's NUL; no system call): it is done for every acquire. See docs/LOCKING.md for
// the measured cost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/lock/clock.hpp>
#include <kagi/lock/holder_info.hpp>
#include <kagi/lock/live_file.hpp>
#include <kagi/lock/mode.hpp>

namespace kagi::lock {

struct RegistryEntry {
  // Empty for this host's own entries (from the registry); the host's name for entries read
  // from a lock server that several hosts share (lock/cluster_status.hpp).
  std::string host;
  std::string name;
  Mode mode = Mode::kShared;
  bool waiting = false;  // false: held
  std::string request_id, method, path, client_address;
  int pid = 0;
  long thread = 0;  // kernel thread id
  std::chrono::system_clock::time_point since;
  // Where the record was read: what request_revoke() needs to name exactly this record.
  int slot = -1;
  uint64_t seq = 0;
  // dir backend (entries read from the owner records under locks.dir): the record as
  // "<lock dir>/<entry>" (what break_stale_lock() takes), its lease's expiry and lease
  // length, and its fencing token (0: shared, or not known). Empty / zero otherwise.
  std::string record;
  std::chrono::system_clock::time_point lease_expiry;
  std::chrono::milliseconds lease{0};
  uint64_t token = 0;
};

struct RegistrySnapshot {
  std::vector<RegistryEntry> entries;
  size_t processes = 0;     // live registry files read
  size_t dead_removed = 0;  // files of dead processes cleaned up by this read
};

class Registry {
 public:
  // Creates this process's registry file under `dir` (which must exist; "registry/" is
  // created inside it).
  static std::unique_ptr<Registry> create(const std::string& dir, size_t slots,
                                          std::error_code& ec);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  enum class State { kWaiting, kHeld };

  // Publishes a lock being waited for (or, when it was granted at once, held); returns its
  // slot, or -1 if every slot is in use (counted in overflows(); the lock still works, it is
  // just not shown). `since` is when the wait began or the lock was granted (the caller has
  // read the clock already).
  int publish(const HolderInfo& who, std::string_view name, Mode mode,
              Clock::time_point since = Clock::now(), State state = State::kWaiting) noexcept;
  // The published waiting lock is now held, since `since`.
  void mark_held(int slot, Clock::time_point since = Clock::now()) noexcept;
  void clear(int slot) noexcept;
  uint64_t overflows() const;

  // True if another process asked (request_revoke) to revoke the record now in `slot`. Only
  // the owner calls it; one atomic load per call.
  bool revoke_requested(int slot) const noexcept;

  // Asks process `pid` to revoke the record it has in `slot`, if its sequence number is still
  // `seq` (from RegistrySnapshot). Returns at once; the owner's watchdog revokes it within
  // LockOptions::watchdog_interval. Errc::kReleased if the record changed or the process is gone
  // (the lock was released meanwhile), EINVAL for a slot out of range, or an errno.
  static std::error_code request_revoke(const std::string& dir, int pid, int slot, uint64_t seq);

  // Reads every live process's registry under `dir`; removes files of dead processes.
  static RegistrySnapshot read(const std::string& dir);

  const std::string& path() const;

 private:
  Registry(std::unique_ptr<LiveFile> file, void* map, size_t map_size, size_t slots);
  int64_t to_realtime_ns(Clock::time_point t) const;

  // This process's registry file, flock'ed for its life (lock/live_file.hpp).
  std::unique_ptr<LiveFile> file_;
  int pid_;
  // system_clock − steady_clock at creation: converts the callers' steady readings to wall
  // time for display without another clock read per acquire.
  std::chrono::nanoseconds wall_offset_;
  void* map_;
  size_t map_size_;
  size_t slots_;  // records in the map (revoke requests are checked against it)
  // A bit per slot, set while the slot is taken: taking one is a compare-and-swap, freeing it
  // one atomic AND (no mutex on the acquire path). Bits past the last slot stay set.
  std::unique_ptr<std::atomic<uint64_t>[]> in_use_;
  size_t in_use_words_;
  std::atomic<uint64_t> overflows_{0};

  int take_slot() noexcept;
};

}  // namespace kagi::lock
