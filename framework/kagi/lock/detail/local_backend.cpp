// The `local` backend: threads and processes of one host (lock/detail/table.hpp in front of
// lock/detail/file_lock.hpp).
#include <atomic>
#include <csignal>

#include <kagi/lock/detail/backend.hpp>
#include <kagi/lock/detail/table.hpp>
#include <kagi/lock/errors.hpp>

namespace kagi::lock {
namespace {

// Local locks cannot be lost while held (the kernel keeps them until release or death), so
// the epoch only has to tell grants apart: a process-wide counter, marked unordered.
std::atomic<uint64_t> g_epoch{0};

uint64_t next_epoch() {
  return (g_epoch.fetch_add(1, std::memory_order_relaxed) + 1) | kUnorderedEpoch;
}

class LocalBackend;

class LocalSession : public Session {
 public:
  explicit LocalSession(LockTable& table) : table_(table) {}

  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                          uint64_t& epoch, void*& handle, bool* contended) override {
    LockTable::Grant grant;
    if (auto ec = table_.acquire(name, mode, deadline, grant, contended)) return ec;
    epoch = next_epoch();
    handle = grant.entry;
    return {};
  }
  std::error_code try_acquire(std::string_view name, Mode mode, Clock::time_point, uint64_t& epoch,
                              void*& handle) override {
    LockTable::Grant grant;
    if (auto ec = table_.try_acquire(name, mode, grant)) return ec;
    epoch = next_epoch();
    handle = grant.entry;
    return {};
  }
  void release(std::string_view, Mode mode, void* handle) noexcept override {
    LockTable::Grant grant{static_cast<LockTable::Entry*>(handle), mode};
    table_.release(grant);
  }
  std::error_code verify(std::string_view, uint64_t, void* handle) const noexcept override {
    return handle ? std::error_code() : make_error_code(Errc::kFenceLost);
  }

 private:
  LockTable& table_;
};

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(const LockOptions& options)
      : files_(options.dir, options.wait_signal < 0    ? 0
                            : options.wait_signal == 0 ? SIGRTMIN + 5
                                                       : options.wait_signal),
        table_(&files_, options.max_idle_fds) {}
  std::string_view kind() const override { return "local"; }
  std::unique_ptr<Session> open_session(const HolderInfo&) override {
    return std::make_unique<LocalSession>(table_);
  }
  size_t active_names() const override { return table_.size(); }

 private:
  FileLocks files_;
  LockTable table_;
};

}  // namespace

std::unique_ptr<Backend> make_local_backend(const LockOptions& options) {
  return std::make_unique<LocalBackend>(options);
}

}  // namespace kagi::lock
