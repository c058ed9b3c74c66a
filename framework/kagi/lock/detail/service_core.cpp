#include <kagi/lock/detail/service_core.hpp>

#include <system_error>

#include <kagi/lock/detail/log.hpp>

namespace kagi::lock::detail {
namespace {

std::unique_ptr<Registry> make_registry(const LockOptions& options) {
  if (!options.registry) return nullptr;
  std::error_code ec;
  const std::string dir = host_state_dir(options);
  auto registry = Registry::create(dir, options.registry_slots, ec);
  if (!registry) {
    throw std::system_error(ec, "cannot create the lock status registry in '" + dir + "/registry'");
  }
  return registry;
}

}  // namespace

ServiceCore::ServiceCore(const LockOptions& options)
    : options(options), registry(make_registry(options)), backend(make_backend(options)) {}

void ServiceCore::add(LockOwner* owner) {
  util::MutexLock lock(mu_);
  owners_.push_back(owner);
}

void ServiceCore::remove(LockOwner* owner) noexcept {
  util::MutexLock lock(mu_);
  for (auto& o : owners_) {
    if (o == owner) {
      o = owners_.back();
      owners_.pop_back();
      return;
    }
  }
}

size_t ServiceCore::revoke_due() {
  const auto now = Clock::now();
  const auto overdue_before =
      options.max_hold.count() > 0 ? now - options.max_hold : Clock::time_point::min();
  size_t revoked = 0;
  std::vector<std::string> log;
  {
    util::MutexLock lock(mu_);
    for (LockOwner* owner : owners_) revoked += owner->revoke_due(now, overdue_before, log);
  }
  // Outside the mutexes: a slow stderr must not hold up requests starting or releasing.
  for (const std::string& line : log) log_event(line);
  return revoked;
}

}  // namespace kagi::lock::detail
