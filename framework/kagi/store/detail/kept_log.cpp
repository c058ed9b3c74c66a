#include <kagi/store/detail/kept_log.hpp>

#include <fcntl.h>

#include <utility>

namespace kagi::store::detail {

namespace {

// One per thread. Its strings outlive the descriptors kept in it, so keeping the next log
// of the same path and lock reuses them.
struct Slot {
  uint64_t store = 0;  // which DataDir (its serial: an address may come back)
  std::string path;
  std::string lock;  // the guard's lock name and epoch: the grant it was kept under
  uint64_t epoch = 0;
  KeptLog log;
};

thread_local Slot t_slot;

bool kept_for(uint64_t store, std::string_view path) {
  return t_slot.log.fd && t_slot.store == store && t_slot.path == path;
}

}  // namespace

bool keepable(const lock::Guard& guard) {
  return guard.mode() == lock::Mode::kExclusive && guard.epoch() != 0;
}

void keep_log(uint64_t store, std::string_view path, const lock::Guard& guard, KeptLog log) {
  t_slot.store = store;
  t_slot.path.assign(path);
  t_slot.lock.assign(guard.name());
  t_slot.epoch = guard.epoch();
  t_slot.log = std::move(log);
}

void add_no_atime(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NOATIME);
}

std::optional<KeptLog> take_kept_log(uint64_t store, std::string_view path,
                                     const lock::Guard* grant) {
  if (!kept_for(store, path)) return std::nullopt;
  KeptLog log = std::move(t_slot.log);
  t_slot.log = KeptLog{};
  if (grant &&
      (!keepable(*grant) || t_slot.epoch != grant->epoch() || t_slot.lock != grant->name())) {
    return std::nullopt;  // another grant: the lock was free in between; `log` closes here
  }
  return log;
}

void drop_kept_log(uint64_t store, std::string_view path) {
  if (kept_for(store, path)) t_slot.log = KeptLog{};
}

}  // namespace kagi::store::detail
