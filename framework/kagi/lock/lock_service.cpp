#include <kagi/lock/lock_service.hpp>

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <kagi/lock/detail/backend.hpp>
#include <kagi/util/process.hpp>

namespace kagi::lock {

std::unique_ptr<LockService> LockService::create(const LockOptions& options) {
  if (options.timeout.count() <= 0) {
    throw std::invalid_argument("locks.timeout_ms must be positive (got " +
                                std::to_string(options.timeout.count()) + ")");
  }
  if (options.dir.empty()) throw std::invalid_argument("locks.dir is empty");
  if (options.max_hold.count() < 0) {
    throw std::invalid_argument("locks.max_hold_ms must be 0 (off) or positive (got " +
                                std::to_string(options.max_hold.count()) + ")");
  }
  std::error_code ec;
  // A folder made here is the owner's only (0700): lock files are named after what they
  // protect, and the registry names clients. An existing folder keeps its mode.
  if (std::filesystem::create_directories(options.dir, ec) && !ec) {
    std::filesystem::permissions(options.dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  if (ec) {
    throw std::system_error(ec, "cannot create locks.dir '" + options.dir +
                                    "' (check that its parent exists and is writable)");
  }
  // With `dir`, this host's registry and stats get a folder of their own inside (made 0700
  // like locks.dir; the host id is checked first, since it names the folder).
  if (options.backend == "dir") check_dir_options(options);
  if (const std::string state = host_state_dir(options); state != options.dir) {
    std::filesystem::create_directories(state, ec);
    if (ec) throw std::system_error(ec, "cannot create '" + state + "' in locks.dir");
  }
  return std::unique_ptr<LockService>(new LockService(options));
}

LockService::LockService(const LockOptions& options) : core_(options), pid_(util::current_pid()) {
  // Nothing to watch without a hold bound or a registry an admin could post revokes into.
  if (core_.options.max_hold.count() > 0 || core_.registry) {
    watchdog_ = std::thread([this] { run_watchdog(); });
  }
}

LockService::~LockService() {
  {
    util::MutexLock lock(watchdog_mu_);
    stopping_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void LockService::run_watchdog() {
  const auto interval = core_.options.watchdog_interval.count() > 0
                            ? core_.options.watchdog_interval
                            : std::chrono::milliseconds(100);
  util::MutexLock lock(watchdog_mu_);
  while (!stopping_) {
    const auto next = Clock::now() + interval;
    while (!stopping_ &&
           watchdog_cv_.wait_until(watchdog_mu_, next) == std::cv_status::no_timeout) {
    }
    if (stopping_) break;
    watchdog_mu_.unlock();  // a pass takes the contexts' mutexes; stopping waits for it
    core_.revoke_due();
    watchdog_mu_.lock();
  }
}

std::error_code LockService::request_revoke(const RegistryEntry& entry) const {
  return Registry::request_revoke(host_state_dir(core_.options), entry.pid, entry.slot, entry.seq);
}

std::unique_ptr<LockContext> LockService::context(HolderInfo who) {
  if (util::current_pid() != pid_) {  // no system call: cached, refreshed at fork
    throw std::logic_error(
        "LockService used in a child process: create the LockService after fork()");
  }
  auto session = core_.backend->open_session(who);
  return std::make_unique<LockContext>(core_, std::move(who), std::move(session));
}

RegistrySnapshot LockService::snapshot() const {
  return Registry::read(host_state_dir(core_.options));
}

}  // namespace kagi::lock
