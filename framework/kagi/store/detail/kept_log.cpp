#include <kagi/store/detail/kept_log.hpp>

#include <fcntl.h>

#include <utility>

namespace kagi::store::detail {

namespace {

thread_local KeptLog t_kept;

bool kept_for(uint64_t store, std::string_view path) {
  return t_kept.fd && t_kept.store == store && t_kept.path == path;
}

}  // namespace

bool keepable(const lock::Guard& guard) {
  return guard.mode() == lock::Mode::kExclusive && guard.epoch() != 0;
}

void keep_log(KeptLog log) { t_kept = std::move(log); }

void add_no_atime(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NOATIME);
}

std::optional<KeptLog> take_kept_log(uint64_t store, std::string_view path,
                                     const lock::Guard& guard) {
  if (!kept_for(store, path)) return std::nullopt;
  KeptLog log = std::move(t_kept);
  t_kept = KeptLog{};
  if (!keepable(guard) || log.epoch != guard.epoch() || log.lock != guard.name()) {
    return std::nullopt;  // another grant: the lock was free in between; `log` closes here
  }
  return log;
}

std::optional<KeptLog> take_kept_log_to_check(uint64_t store, std::string_view path) {
  if (!kept_for(store, path)) return std::nullopt;
  KeptLog log = std::move(t_kept);
  t_kept = KeptLog{};
  return log;
}

void drop_kept_log(uint64_t store, std::string_view path) {
  if (kept_for(store, path)) t_kept = KeptLog{};
}

}  // namespace kagi::store::detail
