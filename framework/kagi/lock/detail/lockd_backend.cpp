// The `lockd` backend: locks held by kagi-lockd (docs/LOCKD.md), one pooled connection per
// lock context.
//
// A context's first lock takes a connection from the process's pool and keeps it until the
// request ends; every lock of the request is held on it with the extended commands
// (LOCK/SHARED <name> <ms>, LOCKSET), so the server releases all of them the moment that
// connection ends: the process killed, the host gone (keepalive bounds on both ends), the
// network cut. The request's CLIENT label ("kagi/<host>/<pid> <request id> <method>
// <path>") goes with its first lock command in the same write, so STATUS and the admin page
// show who holds what at no extra round trip.
//
// Fencing: every grant's token is the epoch (ordered: kagi-lockd's tokens increase per key and
// stay below 2^63); verify() asks VERIFY <name> <token> on the lock's connection.
//
// Waits run in the server: it ends a wait at its timeout ("busy"); the client waits for the
// answer until the deadline plus LockdOptions::grace, then gives the connection up.
//
// A connection that ends while the request holds locks on it takes all of them along: the
// session then says so (lost_held_locks()), the context fences every guard, and the request
// takes no more locks until it ends. So kagi never sends what the server would refuse with an
// error (which closes the connection): more keys than it allows, or a line longer than it
// reads (kLockdMaxKeys, kLockdMaxLineBytes).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <utility>
#include <vector>

#include <kagi/lock/detail/backend.hpp>
#include <kagi/lock/detail/holder_text.hpp>
#include <kagi/lock/detail/lockd_client.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/process.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock {
namespace {

using detail::LockdConnection;
using detail::LockdPool;

class LockdBackend;

class LockdSession : public Session {
 public:
  LockdSession(LockdBackend& backend, const HolderInfo& who);
  ~LockdSession() override { end_request(); }

  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                          uint64_t& epoch, void*& handle, bool* contended) override;
  std::error_code try_acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                              uint64_t& epoch, void*& handle) override;
  void release(std::string_view name, Mode mode, void* handle) noexcept override;
  std::error_code verify(std::string_view name, uint64_t epoch,
                         void* handle) const noexcept override;
  bool takes_sets_at_once() const override { return true; }
  std::error_code acquire_set(std::span<SetEntry> entries, Clock::time_point deadline) override;
  void end_request() noexcept override;
  std::string last_error() const override;
  bool lost_held_locks() const noexcept override { return lost_.load(std::memory_order_acquire); }

 private:
  class CallLock;
  struct PendingRelease {
    std::string name;
    uint64_t generation;
  };

  // Pins a connection and runs one lock command (`command`, without the label): its answer
  // in answer_. Once more on a fresh connection if a pooled one turns out dead while this
  // request held nothing on it. Refused at once once the request lost its locks.
  std::error_code lock_command(const std::string& command, Clock::time_point deadline)
      KAGI_REQUIRES(mu_);
  // Sends `request` and reads one answer line into answer_; a failure drops the connection.
  std::error_code round_trip(std::string_view request, Clock::time_point deadline) const
      KAGI_REQUIRES(mu_);
  std::error_code take(std::string_view name, Mode mode, bool wait, Clock::time_point deadline,
                       uint64_t& epoch, void*& handle) KAGI_REQUIRES(mu_);
  void unlock(std::string_view name, uint64_t generation) const noexcept KAGI_REQUIRES(mu_);
  void drain_pending() const noexcept KAGI_REQUIRES(mu_) KAGI_EXCLUDES(pending_mu_);
  // Lets mu_ go after the releases queued meanwhile are sent; if more were queued while it was
  // let go, takes it again to send them (the watchdog's release() looks once more too), so
  // none waits for the request's next call.
  void leave() const noexcept KAGI_RELEASE(mu_) KAGI_EXCLUDES(pending_mu_);
  bool has_pending() const noexcept KAGI_EXCLUDES(pending_mu_);
  // Closes the connection (the server releases what it holds); if it held locks, the request
  // has lost them all (lost_).
  void drop_connection() const noexcept KAGI_REQUIRES(mu_);
  std::error_code failed(std::error_code ec, std::string why) const KAGI_REQUIRES(mu_);
  // The answer is not "ok ..." / "busy": what the server said, as an error.
  std::error_code unexpected(const char* doing) const KAGI_REQUIRES(mu_);
  // Why `more` locks are refused beside the ones held (kLockdMaxKeys).
  std::string too_many(size_t more) const KAGI_REQUIRES(mu_);

  LockdBackend& backend_;
  const std::string label_;  // "CLIENT kagi/<host>/<pid> <request id> <method> <path>\n"
  mutable util::Mutex mu_;
  mutable std::unique_ptr<LockdConnection> conn_ KAGI_GUARDED_BY(mu_);
  mutable uint64_t generation_ KAGI_GUARDED_BY(mu_) = 0;
  mutable bool labelled_ KAGI_GUARDED_BY(mu_) = false;  // conn_ has this request's label
  mutable size_t held_ KAGI_GUARDED_BY(mu_) = 0;
  // Set when a connection ended under locks of this request; cleared by end_request().
  mutable std::atomic<bool> lost_{false};
  mutable std::string answer_ KAGI_GUARDED_BY(mu_);
  mutable std::string last_error_ KAGI_GUARDED_BY(mu_);
  mutable util::Mutex pending_mu_;
  mutable std::vector<PendingRelease> pending_ KAGI_GUARDED_BY(pending_mu_);
};

// mu_ for one call of the request's thread (or the watchdog's release), let go by leave().
class KAGI_SCOPED_CAPABILITY LockdSession::CallLock {
 public:
  explicit CallLock(const LockdSession& s) KAGI_ACQUIRE(s.mu_) : s_(s) { s_.mu_.lock(); }
  ~CallLock() KAGI_RELEASE() { s_.leave(); }
  CallLock(const CallLock&) = delete;
  CallLock& operator=(const CallLock&) = delete;

 private:
  const LockdSession& s_;
};

class LockdBackend : public Backend {
 public:
  explicit LockdBackend(const LockOptions& options)
      : options_(options),
        pool_(detail::make_lockd_target(options.lockd)),
        process_("kagi/" + util::host_name() + "/" + std::to_string(util::current_pid())) {}

  std::string_view kind() const override { return "lockd"; }
  std::unique_ptr<Session> open_session(const HolderInfo& who) override {
    return std::make_unique<LockdSession>(*this, who);
  }
  size_t active_names() const override { return active_.load(std::memory_order_relaxed); }

  const LockOptions& options() const { return options_; }
  LockdPool& pool() { return pool_; }
  const std::string& process() const { return process_; }
  void count_active(ptrdiff_t delta) {
    active_.fetch_add(static_cast<size_t>(delta), std::memory_order_relaxed);
  }

 private:
  const LockOptions options_;
  LockdPool pool_;
  const std::string process_;
  std::atomic<size_t> active_{0};
};

void* handle_of(uint64_t generation) { return reinterpret_cast<void*>(generation); }
uint64_t generation_of(void* handle) { return reinterpret_cast<uint64_t>(handle); }

// The milliseconds left to `deadline`, rounded up: the server must not end a wait before the
// caller's deadline. 0 if none are left; at most the longest wait the protocol takes (a day).
int64_t ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::clamp<int64_t>(left.count(), 0, 86'400'000);
}

// "CLIENT <label>\n": the process and the request, within the server's 512 bytes of label (a
// long path is cut, never in the middle of a %XX).
std::string client_line(const std::string& process, const HolderInfo& who) {
  std::string label = process + " " + detail::holder_fields(who);
  if (label.size() > 500) {
    label.resize(500);
    if (const size_t pct = label.rfind('%'); pct != std::string::npos && pct + 3 > label.size()) {
      label.resize(pct);
    }
  }
  return "CLIENT " + label + "\n";
}

// Parses "ok <t1> <t2> ..." into `tokens` (exactly `n`); false for any other answer.
bool parse_tokens(std::string_view answer, size_t n, uint64_t* tokens) {
  if (answer.substr(0, 2) != "ok") return false;
  answer.remove_prefix(2);
  for (size_t i = 0; i < n; ++i) {
    if (answer.empty() || answer.front() != ' ') return false;
    answer.remove_prefix(1);
    const auto [end, ec] = std::from_chars(answer.data(), answer.data() + answer.size(), tokens[i]);
    if (ec != std::errc() || end == answer.data()) return false;
    answer.remove_prefix(static_cast<size_t>(end - answer.data()));
  }
  return answer.empty();
}

LockdSession::LockdSession(LockdBackend& backend, const HolderInfo& who)
    : backend_(backend), label_(client_line(backend.process(), who)) {}

std::error_code LockdSession::failed(std::error_code ec, std::string why) const {
  last_error_ = std::move(why);
  return ec;
}

std::error_code LockdSession::unexpected(const char* doing) const {
  const std::string said = answer_;
  drop_connection();  // an answer we do not understand: let the server release everything
  return failed(make_error_code(Errc::kBackend),
                std::string("kagi-lockd ") + doing + ": unexpected answer '" + said + "'");
}

void LockdSession::drop_connection() const noexcept {
  if (!conn_) return;
  if (held_ > 0) lost_.store(true, std::memory_order_release);
  backend_.count_active(-static_cast<ptrdiff_t>(held_));
  held_ = 0;
  backend_.pool().discard(std::move(conn_));  // closing it releases what it holds
}

std::error_code LockdSession::round_trip(std::string_view request,
                                         Clock::time_point deadline) const {
  std::string why;
  std::error_code ec = conn_->send(request, deadline, &why);
  if (!ec) ec = conn_->read_line(answer_, deadline, &why);
  if (!ec && conn_->broken()) {  // "error ...": the server closed after it
    ec = make_error_code(Errc::kBackend);
    why = "kagi-lockd refused a command: " + answer_;
  }
  if (!ec) return {};
  drop_connection();
  return failed(ec == Errc::kBackend ? ec : make_error_code(Errc::kUnavailable), why);
}

std::error_code LockdSession::lock_command(const std::string& command, Clock::time_point deadline) {
  if (lost_.load(std::memory_order_relaxed)) {
    return failed(make_error_code(Errc::kUnavailable),
                  "kagi-lockd: this request's connection ended while it held locks, so they "
                  "are gone; it takes no more until it ends");
  }
  for (int tries = 0;; ++tries) {
    // Decided before the round trip: a failure drops the connection, and with it held_.
    const bool held_nothing = held_ == 0;
    if (!conn_) {
      std::error_code ec;
      std::string why;
      conn_ = backend_.pool().take(deadline, ec, &why);
      if (!conn_) return failed(make_error_code(Errc::kUnavailable), why);
      ++generation_;
      labelled_ = false;
    }
    std::error_code ec;
    if (labelled_) {
      ec = round_trip(command, deadline);
    } else {
      // The label and the lock in one write: two answers, one round trip.
      ec = round_trip(label_ + command, deadline);
      if (!ec && answer_ == "ok") {
        labelled_ = true;
        std::string why;
        ec = conn_->read_line(answer_, deadline, &why);
        if (ec) {
          drop_connection();
          ec = failed(make_error_code(Errc::kUnavailable), why);
        } else if (conn_->broken()) {
          drop_connection();
          ec = failed(make_error_code(Errc::kBackend), "kagi-lockd refused a command: " + answer_);
        }
      } else if (!ec) {
        return unexpected("CLIENT");
      }
    }
    // A pooled connection the server closed meanwhile (restart): once more, on a new one.
    if (ec == Errc::kUnavailable && tries == 0 && held_nothing && Clock::now() < deadline) {
      continue;
    }
    return ec;
  }
}

std::error_code LockdSession::take(std::string_view name, Mode mode, bool wait,
                                   Clock::time_point deadline, uint64_t& epoch, void*& handle) {
  drain_pending();
  if (held_ >= detail::kLockdMaxKeys) {
    return failed(make_error_code(Errc::kBackend), too_many(1));
  }
  const int64_t ms = wait ? ms_left(deadline) : 0;
  if (wait && ms == 0) return make_error_code(Errc::kTimeout);
  std::string command = mode == Mode::kShared ? "SHARED " : "LOCK ";
  command += name;
  command += ' ';
  command += std::to_string(ms);
  command += '\n';
  if (wait) backend_.count_active(1);
  const std::error_code ec =
      lock_command(command, wait ? deadline + backend_.options().lockd.grace : deadline);
  if (wait) backend_.count_active(-1);
  if (ec) return ec;
  if (answer_ == "busy") return make_error_code(Errc::kTimeout);
  uint64_t token = 0;
  if (!parse_tokens(answer_, 1, &token)) return unexpected("LOCK");
  ++held_;
  backend_.count_active(1);
  epoch = token;
  handle = handle_of(generation_);
  return {};
}

std::error_code LockdSession::acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                      uint64_t& epoch, void*& handle, bool* contended) {
  CallLock lock(*this);
  if (contended) *contended = true;  // the context tried without waiting first
  return take(name, mode, true, deadline, epoch, handle);
}

std::error_code LockdSession::try_acquire(std::string_view name, Mode mode,
                                          Clock::time_point deadline, uint64_t& epoch,
                                          void*& handle) {
  CallLock lock(*this);
  return take(name, mode, false, deadline, epoch, handle);
}

std::error_code LockdSession::acquire_set(std::span<SetEntry> entries, Clock::time_point deadline) {
  CallLock lock(*this);
  drain_pending();
  if (held_ + entries.size() > detail::kLockdMaxKeys) {
    return failed(make_error_code(Errc::kBackend), too_many(entries.size()));
  }
  // The common case in one round trip: the whole set, free now, taken by the server in this
  // (canonical) order, all or nothing.
  std::string command = "LOCKSET ";
  for (const SetEntry& e : entries) command += e.mode == Mode::kShared ? 's' : 'x';
  command += "/0";
  for (const SetEntry& e : entries) {
    command += ' ';
    command += e.name;
  }
  command += '\n';
  // A set of long names may not fit on one line: then one by one, as for a busy set.
  if (command.size() <= detail::kLockdMaxLineBytes) {
    if (auto ec = lock_command(command, deadline)) return ec;
    if (answer_ != "busy") {
      std::vector<uint64_t> tokens(entries.size());
      if (!parse_tokens(answer_, entries.size(), tokens.data())) return unexpected("LOCKSET");
      for (size_t i = 0; i < entries.size(); ++i) {
        entries[i].epoch = tokens[i];
        entries[i].handle = handle_of(generation_);
        entries[i].contended = false;
      }
      held_ += entries.size();
      backend_.count_active(static_cast<ptrdiff_t>(entries.size()));
      return {};
    }
  }
  // Some name is taken: one by one in the same order, each tried first, so the stats and the
  // registry know which names waited; what was taken goes back if one is not had in time.
  for (size_t i = 0; i < entries.size(); ++i) {
    SetEntry& e = entries[i];
    std::error_code ec = take(e.name, e.mode, false, deadline, e.epoch, e.handle);
    e.contended = ec == Errc::kTimeout;
    if (e.contended) ec = take(e.name, e.mode, true, deadline, e.epoch, e.handle);
    if (ec) {
      for (size_t j = 0; j < i; ++j) {
        unlock(entries[j].name, generation_of(entries[j].handle));
        entries[j].handle = nullptr;
      }
      return ec;
    }
  }
  return {};
}

void LockdSession::unlock(std::string_view name, uint64_t generation) const noexcept {
  // Granted on a connection that ended since: the server released it then.
  if (generation != generation_ || !conn_ || conn_->broken()) return;
  try {
    std::string command = "UNLOCK ";
    command += name;
    command += '\n';
    if (round_trip(command, Clock::now() + backend_.options().timeout)) return;  // dropped
  } catch (...) {  // out of memory: let the server release it by closing
    drop_connection();
    return;
  }
  if (answer_ != "ok") {
    drop_connection();
    return;
  }
  --held_;
  backend_.count_active(-1);
}

void LockdSession::drain_pending() const noexcept {
  std::vector<PendingRelease> pending;
  {
    util::MutexLock lock(pending_mu_);
    pending.swap(pending_);
  }
  for (const PendingRelease& p : pending) unlock(p.name, p.generation);
}

bool LockdSession::has_pending() const noexcept {
  util::MutexLock lock(pending_mu_);
  return !pending_.empty();
}

void LockdSession::leave() const noexcept {
  drain_pending();
  mu_.unlock();
  while (has_pending() && mu_.try_lock()) {
    drain_pending();
    mu_.unlock();
  }
}

void LockdSession::release(std::string_view name, Mode, void* handle) noexcept {
  // The watchdog may call this while the request's thread waits on the connection: then the
  // release is queued, and sent by that thread as soon as its answer arrives (lines sent
  // meanwhile would wait in the server behind the wait anyway).
  if (mu_.try_lock()) {
    unlock(name, generation_of(handle));
    leave();
    return;
  }
  bool queued = false;
  {
    util::MutexLock lock(pending_mu_);
    try {
      pending_.push_back({std::string(name), generation_of(handle)});
      queued = true;
    } catch (...) {
    }
  }
  if (!queued) {  // out of memory: wait for the connection after all
    CallLock lock(*this);
    unlock(name, generation_of(handle));
    return;
  }
  // The request's thread may have let mu_ go before it could see the queued release.
  if (mu_.try_lock()) leave();
}

std::error_code LockdSession::verify(std::string_view name, uint64_t epoch,
                                     void* handle) const noexcept {
  CallLock lock(*this);
  if (!conn_ || conn_->broken() || generation_of(handle) != generation_) {
    return make_error_code(Errc::kFenceLost);
  }
  try {
    std::string command = "VERIFY ";
    command += name;
    command += ' ';
    command += std::to_string(epoch);
    command += '\n';
    if (round_trip(command, Clock::now() + backend_.options().timeout)) {
      return make_error_code(Errc::kFenceLost);
    }
  } catch (...) {
    return make_error_code(Errc::kFenceLost);
  }
  return answer_ == "ok" ? std::error_code() : make_error_code(Errc::kFenceLost);
}

void LockdSession::end_request() noexcept {
  CallLock lock(*this);
  drain_pending();
  if (conn_) {
    if (held_ != 0) {
      drop_connection();  // something is still held: closing releases it
    } else {
      backend_.pool().give_back(std::move(conn_));
    }
  }
  lost_.store(false, std::memory_order_release);  // the next request starts afresh
}

std::string LockdSession::last_error() const {
  CallLock lock(*this);
  return last_error_;
}

std::string LockdSession::too_many(size_t more) const {
  return "kagi-lockd holds at most " + std::to_string(detail::kLockdMaxKeys) +
         " locks per connection (lockd.max_keys_per_connection): this request holds " +
         std::to_string(held_) + " and asks for " + std::to_string(more) + " more";
}

}  // namespace

std::unique_ptr<Backend> make_lockd_backend(const LockOptions& options) {
  return std::make_unique<LockdBackend>(options);
}

}  // namespace kagi::lock
