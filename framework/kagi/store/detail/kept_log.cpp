#include <kagi/store/detail/kept_log.hpp>

#include <fcntl.h>

#include <array>
#include <utility>

namespace kagi::store::detail {

namespace {

// kKeptPerThread per thread. Their strings outlive the descriptors kept in them, so keeping the
// next log of the same path and lock reuses them.
struct Slot {
  uint64_t store = 0;  // which DataDir (its serial: an address may come back)
  std::string path;
  std::string lock;  // the guard's lock name and epoch: the grant it was kept under
  uint64_t epoch = 0;
  uint64_t used = 0;  // when last kept, in this thread's count: the oldest is replaced first
  KeptLog log;
};

thread_local std::array<Slot, kKeptPerThread> t_slots;
thread_local uint64_t t_uses = 0;

// The slot named for (store, path), holding a descriptor or not (at most one is), or null.
Slot* slot_named(uint64_t store, std::string_view path) {
  for (Slot& slot : t_slots) {
    if (slot.store == store && slot.path == path) return &slot;
  }
  return nullptr;
}

// The slot holding a descriptor of (store, path), or null.
Slot* kept_for(uint64_t store, std::string_view path) {
  Slot* slot = slot_named(store, path);
  return slot && slot->log.fd ? slot : nullptr;
}

// Where to keep (store, path): the slot named for it (its strings are reused), else an empty one,
// else the least recently kept.
Slot& slot_for(uint64_t store, std::string_view path) {
  if (Slot* own = slot_named(store, path)) return *own;
  Slot* pick = &t_slots[0];
  for (Slot& slot : t_slots) {
    if (!slot.log.fd) return slot;
    if (slot.used < pick->used) pick = &slot;
  }
  return *pick;
}

}  // namespace

bool keepable(const lock::Guard& guard) {
  return guard.mode() == lock::Mode::kExclusive && guard.epoch() != 0;
}

void keep_log(uint64_t store, std::string_view path, const lock::Guard& guard, KeptLog log) {
  Slot& slot = slot_for(store, path);
  slot.store = store;
  slot.path.assign(path);
  slot.lock.assign(guard.name());
  slot.epoch = guard.epoch();
  slot.used = ++t_uses;
  slot.log = std::move(log);
}

void add_no_atime(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NOATIME);
}

std::optional<KeptLog> take_kept_log(uint64_t store, std::string_view path,
                                     const lock::Guard& guard, bool* same_grant) {
  Slot* slot = kept_for(store, path);
  if (slot == nullptr) return std::nullopt;
  KeptLog log = std::move(slot->log);
  slot->log = KeptLog{};
  *same_grant = keepable(guard) && slot->epoch == guard.epoch() && slot->lock == guard.name();
  return log;
}

void drop_kept_log(uint64_t store, std::string_view path) {
  if (Slot* slot = kept_for(store, path)) slot->log = KeptLog{};
}

size_t kept_logs() {
  size_t n = 0;
  for (const Slot& slot : t_slots) n += slot.log.fd ? 1 : 0;
  return n;
}

}  // namespace kagi::store::detail
