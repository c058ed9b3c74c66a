#include <kagi/lock/lock_service.hpp>

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <kagi/lock/log.hpp>
#include <kagi/util/process.hpp>

namespace kagi::lock {

std::unique_ptr<LockService> LockService::create(const LockOptions& options) {
  if (options.backend != "local") {
    throw std::invalid_argument("locks.backend = '" + options.backend +
                                "' is not available in this build; use \"local\"");
  }
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
  return std::unique_ptr<LockService>(new LockService(options));
}

LockService::LockService(const LockOptions& options)
    : options_(options), pid_(util::current_pid()) {
  if (options_.registry) {
    std::error_code ec;
    registry_ = Registry::create(options_.dir, options_.registry_slots, ec);
    if (!registry_) {
      throw std::system_error(
          ec, "cannot create the lock status registry in '" + options_.dir + "/registry'");
    }
  }
  backend_ = make_local_backend(options_);
  // Nothing to watch without a hold bound or a registry an admin could post revokes into.
  if (options_.max_hold.count() > 0 || registry_) {
    watchdog_ = std::thread([this] { run_watchdog(); });
  }
}

LockService::~LockService() {
  {
    std::lock_guard lock(watchdog_mu_);
    stopping_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void LockService::run_watchdog() {
  const auto interval = options_.watchdog_interval.count() > 0 ? options_.watchdog_interval
                                                               : std::chrono::milliseconds(100);
  std::unique_lock lock(watchdog_mu_);
  while (!watchdog_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    revoke_due();
    lock.lock();
  }
}

size_t LockService::revoke_due() {
  const auto now = Clock::now();
  const auto overdue_before =
      options_.max_hold.count() > 0 ? now - options_.max_hold : Clock::time_point::min();
  size_t revoked = 0;
  std::vector<std::string> log;
  {
    std::lock_guard lock(contexts_mu_);
    for (LockContext* ctx : contexts_) revoked += ctx->revoke_due(now, overdue_before, log);
  }
  // Outside the mutexes: a slow stderr must not hold up requests starting or releasing.
  for (const std::string& line : log) log_event(line);
  return revoked;
}

std::error_code LockService::request_revoke(const RegistryEntry& entry) const {
  return Registry::request_revoke(options_.dir, entry.pid, entry.slot, entry.seq);
}

void LockService::add_context(LockContext* ctx) {
  std::lock_guard lock(contexts_mu_);
  contexts_.push_back(ctx);
}

void LockService::remove_context(LockContext* ctx) noexcept {
  std::lock_guard lock(contexts_mu_);
  for (auto& c : contexts_) {
    if (c == ctx) {
      c = contexts_.back();
      contexts_.pop_back();
      return;
    }
  }
}

std::unique_ptr<LockContext> LockService::context(HolderInfo who) {
  if (util::current_pid() != pid_) {  // no system call: cached, refreshed at fork
    throw std::logic_error(
        "LockService used in a child process: create the LockService after fork()");
  }
  auto session = backend_->open_session(who);
  return std::make_unique<LockContext>(*this, std::move(who), std::move(session));
}

RegistrySnapshot LockService::snapshot() const { return Registry::read(options_.dir); }

StatsSnapshot LockService::stats() const { return stats_.snapshot(); }

}  // namespace kagi::lock
