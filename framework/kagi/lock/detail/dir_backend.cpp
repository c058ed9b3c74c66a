// The `dir` backend: hosts that share a folder (NFS, a shared disk) without reliable flock.
//
// Three layers, like `local`'s:
//   LockTable (in-process only: FIFO, shared/exclusive, deadlines)  — threads of this process
//   per-name process state (one reader entry per process, refcounted) — shared holders
//   DirLocks (lock directories with owner records, dir_lock.hpp)    — processes and hosts
// Only the thread at the head of this process's queue for a name polls the filesystem; the
// others wait in the table. Waiting for another process is polling with jittered exponential
// back-off (kMinBackoff .. kMaxBackoff), ended by the deadline. A heartbeat thread renews the
// lease of every record this process holds; a waiter that finds a stale record removes it by
// its exact name (dir_lock.hpp) and tries again at once.
#include <algorithm>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <kagi/lock/detail/backend.hpp>
#include <kagi/lock/detail/dir_lock.hpp>
#include <kagi/lock/detail/log.hpp>
#include <kagi/lock/detail/names.hpp>
#include <kagi/lock/detail/table.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/process.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::lock {
namespace {

using std::chrono::milliseconds;

constexpr auto kMinBackoff = std::chrono::microseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(10);
// Readers of this process join the process's reader entry without a system call for at most
// this many grants or this long; then they look once for a waiting writer (as `local`'s
// batches do), so a process's readers cannot starve another process's writer.
constexpr int kMaxJoins = 32;
constexpr auto kMaxJoinBatch = std::chrono::milliseconds(20);

std::atomic<uint64_t> g_shared_epoch{0};

// One record this process holds on the filesystem: an exclusive grant's own, or the
// process's reader entry that all its shared holders of a name share.
struct FsLock {
  util::Mutex mu;
  dirlock::Hold hold KAGI_GUARDED_BY(mu);
  // When the record was last made or renamed to a later expiry, on the steady clock: the
  // heartbeat's cadence never depends on the wall clock in the record's name.
  Clock::time_point renewed KAGI_GUARDED_BY(mu) = Clock::now();
  // Taken over: verify fails from now on, and no new reader of this process may join it. Set
  // under mu (by whoever's rename of the record failed), read without it (a join must not
  // wait behind a renewal's filesystem call).
  std::atomic<bool> lost{false};
  bool released KAGI_GUARDED_BY(mu) = false;  // let go by this process
};

// What a LockContext holds for one guard. Its fields are set in acquire() before it is handed
// out and never changed after, so it needs no lock; what changes is in the FsLock, which has.
struct Handle {
  LockTable::Grant grant;
  std::string name;
  std::shared_ptr<FsLock> fs;
};

// The process's shared hold of a name, joined by its shared holders. Lives only in
// DirBackend::shared_, so every field is guarded by DirBackend::mu_.
struct SharedName {
  std::shared_ptr<FsLock> fs;  // null while nobody here holds the name shared
  int holders = 0;
  bool joining = false;   // a thread is taking the reader entry on the filesystem
  bool draining = false;  // a writer elsewhere waits: no new joins until the entry is gone
  int joins = 0;
  Clock::time_point since;
};

class DirBackend;

class DirSession : public Session {
 public:
  DirSession(DirBackend& backend, HolderInfo who) : backend_(backend), who_(std::move(who)) {}
  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                          uint64_t& epoch, void*& handle, bool* contended) override;
  std::error_code try_acquire(std::string_view name, Mode mode, Clock::time_point, uint64_t& epoch,
                              void*& handle) override {
    return acquire(name, mode, LockTable::kNoWait, epoch, handle, nullptr);
  }
  void release(std::string_view name, Mode mode, void* handle) noexcept override;
  std::error_code verify(std::string_view name, uint64_t epoch,
                         void* handle) const noexcept override;
  std::string last_error() const override { return last_error_; }

 private:
  DirBackend& backend_;
  const HolderInfo who_;
  std::string last_error_;
};

class DirBackend : public Backend {
 public:
  explicit DirBackend(const LockOptions& options)
      : fs_({.root = options.dir + "/dirlocks",
             .host = dir_host_id(options),
             .lease = options.dir_lease,
             .max_skew = options.dir_max_clock_skew}),
        table_(nullptr) {
    heartbeat_ = std::thread([this] { run_heartbeat(); });
  }

  // The normal stop path: every record still held here is removed, so the next holder
  // need not wait for a lease.
  ~DirBackend() override {
    {
      util::MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    heartbeat_.join();
    std::vector<std::shared_ptr<FsLock>> left;
    {
      util::MutexLock lock(mu_);
      left.assign(live_.begin(), live_.end());
      live_.clear();
    }
    for (auto& fs : left) let_go(*fs);
  }

  std::string_view kind() const override { return "dir"; }
  std::unique_ptr<Session> open_session(const HolderInfo& who) override {
    return std::make_unique<DirSession>(*this, who);
  }
  size_t active_names() const override { return table_.size(); }

  std::error_code acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                          const HolderInfo& who, uint64_t& epoch, Handle*& out, bool* contended,
                          std::string* why) KAGI_EXCLUDES(mu_);
  void release(Handle* h) noexcept KAGI_EXCLUDES(mu_);
  std::error_code verify(Handle* h) noexcept;

 private:
  // Polls the filesystem for `name` until `deadline` (kNoWait: one attempt).
  std::error_code take_fs(std::string_view name, Mode mode, Clock::time_point deadline,
                          const HolderInfo& who, dirlock::Hold& out, bool* contended,
                          std::string* why) KAGI_EXCLUDES(mu_);
  // Removes the stale records of `name`'s lock directory; true if any was removed.
  bool clear_stale(std::string_view name) KAGI_EXCLUDES(seen_mu_);
  std::error_code take_shared(std::string_view name, Clock::time_point deadline,
                              const HolderInfo& who, std::shared_ptr<FsLock>& out, bool* contended,
                              std::string* why) KAGI_EXCLUDES(mu_);
  void let_go(FsLock& fs) noexcept;
  void run_heartbeat() KAGI_EXCLUDES(mu_);

  dirlock::DirLocks fs_;
  LockTable table_;

  util::Mutex mu_;
  util::CondVar cv_;  // a shared join finished, a reader entry was let go, or stopping
  std::unordered_map<std::string, SharedName, NameHash, std::equal_to<>> shared_
      KAGI_GUARDED_BY(mu_);
  std::unordered_set<std::shared_ptr<FsLock>> live_ KAGI_GUARDED_BY(mu_);  // renewed here
  bool stopping_ KAGI_GUARDED_BY(mu_) = false;

  // Entry names seen while waiting, and since when (steady clock): an entry whose name has
  // not changed for a whole lease was not renewed, whatever the clocks of the hosts say.
  util::Mutex seen_mu_;
  std::unordered_map<std::string, Clock::time_point> seen_ KAGI_GUARDED_BY(seen_mu_);

  std::thread heartbeat_;  // last: started once everything above exists
};

std::error_code DirBackend::take_fs(std::string_view name, Mode mode, Clock::time_point deadline,
                                    const HolderInfo& who, dirlock::Hold& out, bool* contended,
                                    std::string* why) {
  thread_local std::minstd_rand jitter(
      static_cast<unsigned>(util::current_pid()) ^
      static_cast<unsigned>(Clock::now().time_since_epoch().count()));
  auto backoff = std::chrono::duration_cast<Clock::duration>(kMinBackoff);
  uint64_t intent_nonce = 0;
  int64_t intent_expiry = 0;          // wall ms, in the intent's name for other hosts
  Clock::time_point intent_posted{};  // when, on this process's steady clock
  auto drop_intent = [&] {
    if (intent_nonce) fs_.remove_intent(name, intent_nonce, intent_expiry);
  };
  for (;;) {
    std::error_code ec = fs_.try_lock(name, mode, who, /*respect_intent=*/true, out, why);
    if (ec != Errc::kTimeout) {
      drop_intent();
      return ec;
    }
    if (contended) *contended = true;
    if (clear_stale(name)) continue;  // a dead holder's record is gone: try again at once
    const auto now = Clock::now();
    if (deadline == LockTable::kNoWait || now >= deadline) {
      drop_intent();
      return ec;
    }
    if (mode == Mode::kExclusive) {
      // Readers hold it: say that a writer waits, so that no new reader joins (renewed
      // before it lapses; a writer that dies leaves an intent that lapses by itself).
      if (!intent_nonce || now - intent_posted >= fs_.config().lease / 2) {
        drop_intent();
        intent_nonce = (static_cast<uint64_t>(jitter()) << 32 | jitter()) | 1;
        intent_expiry = dirlock::wall_ms() + fs_.config().lease.count();
        intent_posted = now;
        fs_.add_intent(name, intent_nonce, intent_expiry);
      }
    }
    // Full jitter: processes that lost the same race do not come back in step.
    std::uniform_int_distribution<Clock::rep> pick(backoff.count() / 2, backoff.count());
    const auto nap = std::min<Clock::duration>(Clock::duration(pick(jitter)), deadline - now);
    std::this_thread::sleep_for(nap);
    backoff = std::min<Clock::duration>(backoff * 2, kMaxBackoff);
  }
}

bool DirBackend::clear_stale(std::string_view name) {
  std::vector<std::string> unknown;
  const auto entries = fs_.entries(name, &unknown);
  const auto now = Clock::now();
  bool removed = false;
  for (const std::string& file : unknown) {
    Clock::duration unchanged{};
    {
      util::MutexLock lock(seen_mu_);
      auto [it, fresh] = seen_.try_emplace(std::string(name) + "/" + file, now);
      unchanged = now - it->second;
    }
    const std::string reason = fs_.unknown_stale_reason(unchanged);
    if (!reason.empty() && fs_.remove_unknown(name, file)) {
      removed = true;
      log_event("dir: removed '" + file + "' from the lock directory of '" + std::string(name) +
                "': " + reason);
    }
  }
  for (const dirlock::Entry& e : entries) {
    Clock::duration unchanged{};
    {
      util::MutexLock lock(seen_mu_);
      auto [it, fresh] = seen_.try_emplace(e.file, now);
      unchanged = now - it->second;
    }
    const std::string reason = fs_.stale_reason(name, e, unchanged);
    if (reason.empty()) continue;
    if (fs_.remove_stale(name, e)) {
      removed = true;
      log_event("dir: took over '" + std::string(name) + "' from a stale " +
                (e.mode == Mode::kExclusive ? "holder" : "reader") + " (" + e.file +
                "): " + reason);
    }
  }
  return removed;
}

std::error_code DirBackend::take_shared(std::string_view name, Clock::time_point deadline,
                                        const HolderInfo& who, std::shared_ptr<FsLock>& out,
                                        bool* contended, std::string* why) {
  util::MutexLock lock(mu_);
  for (;;) {
    SharedName& st = shared_.try_emplace(std::string(name)).first->second;
    if (st.fs && st.fs->lost.load()) {
      // The process's reader record was taken over: whoever joined it before keeps a fenced
      // guard (their release finds another fs here and does nothing), but nobody joins it
      // again; the next reader takes a record of its own on the filesystem.
      live_.erase(st.fs);
      st.fs.reset();
      st.holders = 0;
      st.draining = false;
    }
    if (st.fs && !st.draining) {
      const auto now = Clock::now();
      if (st.joins >= kMaxJoins || now - st.since >= kMaxJoinBatch) {
        // The batch ran out: one look for a waiting writer (mu_ released meanwhile; st may
        // change, so start over after it).
        mu_.unlock();
        const bool writer = fs_.writer_waiting(name);
        mu_.lock();
        SharedName& again = shared_[std::string(name)];
        if (writer) {
          again.draining = true;
        } else {
          again.joins = 0;
          again.since = now;
        }
        continue;
      }
      ++st.joins;
      ++st.holders;
      out = st.fs;
      return {};
    }
    if (st.joining || (st.draining && st.fs)) {
      // Another thread of this process is on the filesystem for it, or the process's entry is
      // draining for a writer elsewhere: wait for that to end.
      if (deadline == LockTable::kNoWait) return make_error_code(Errc::kTimeout);
      if (contended) *contended = true;
      if (cv_.wait_until(mu_, deadline) == std::cv_status::timeout) {
        SharedName& now_st = shared_[std::string(name)];
        if (!now_st.fs && !now_st.joining && now_st.holders == 0) shared_.erase(std::string(name));
        return make_error_code(Errc::kTimeout);
      }
      continue;
    }
    st.joining = true;
    st.draining = false;
    mu_.unlock();
    dirlock::Hold hold;
    std::error_code ec = take_fs(name, Mode::kShared, deadline, who, hold, contended, why);
    mu_.lock();
    SharedName& done = shared_[std::string(name)];
    done.joining = false;
    cv_.notify_all();
    if (ec) {
      if (!done.fs && done.holders == 0) shared_.erase(std::string(name));
      return ec;
    }
    auto fs = std::make_shared<FsLock>();
    {
      util::MutexLock held(fs->mu);
      fs->hold = std::move(hold);
    }
    done.fs = fs;
    done.holders = 1;
    done.joins = 0;
    done.since = Clock::now();
    live_.insert(fs);
    out = std::move(fs);
    return {};
  }
}

std::error_code DirBackend::acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                    const HolderInfo& who, uint64_t& epoch, Handle*& out,
                                    bool* contended, std::string* why) {
  auto h = std::make_unique<Handle>();
  h->name.assign(name);
  if (auto ec = table_.acquire(name, mode, deadline, h->grant, contended)) return ec;
  std::error_code ec;
  if (mode == Mode::kShared) {
    ec = take_shared(name, deadline, who, h->fs, contended, why);
    if (!ec) epoch = (g_shared_epoch.fetch_add(1, std::memory_order_relaxed) + 1) | kUnorderedEpoch;
  } else {
    dirlock::Hold hold;
    ec = take_fs(name, mode, deadline, who, hold, contended, why);
    if (!ec) {
      epoch = hold.entry.token;  // ordered: larger than every earlier grant's, on any host
      h->fs = std::make_shared<FsLock>();
      util::MutexLock held(h->fs->mu);
      h->fs->hold = std::move(hold);
    }
    if (!ec) {
      util::MutexLock lock(mu_);
      live_.insert(h->fs);
    }
  }
  if (ec) {
    table_.release(h->grant);
    return ec;
  }
  out = h.release();
  return {};
}

void DirBackend::let_go(FsLock& fs) noexcept {
  util::MutexLock lock(fs.mu);
  if (fs.released) return;
  fs.released = true;
  if (!fs.lost) fs_.release(fs.hold);
}

void DirBackend::release(Handle* h) noexcept {
  std::unique_ptr<Handle> owned(h);
  std::shared_ptr<FsLock> last;  // the record to remove, if this was its last holder here
  {
    util::MutexLock lock(mu_);
    if (h->grant.mode == Mode::kExclusive) {
      live_.erase(h->fs);
      last = h->fs;
    } else {
      auto it = shared_.find(h->name);
      if (it != shared_.end() && it->second.fs == h->fs && --it->second.holders == 0) {
        live_.erase(h->fs);
        last = h->fs;
        it->second.fs.reset();
        it->second.draining = false;
        if (!it->second.joining) shared_.erase(it);
        cv_.notify_all();
      }
    }
  }
  if (last) let_go(*last);
  table_.release(h->grant);
}

std::error_code DirBackend::verify(Handle* h) noexcept {
  if (!h || !h->fs) return make_error_code(Errc::kFenceLost);
  FsLock& fs = *h->fs;
  util::MutexLock lock(fs.mu);
  if (fs.lost || fs.released) return make_error_code(Errc::kFenceLost);
  // Asks the filesystem itself (a rename of our exact record name, which fails once it was
  // taken over) and starts a fresh lease: what follows has a whole lease before any honest
  // contender may call it stale.
  const auto asked = Clock::now();
  std::error_code ec = fs_.renew(fs.hold);
  if (!ec) fs.renewed = asked;
  if (ec == Errc::kFenceLost) fs.lost = true;
  return ec ? make_error_code(Errc::kFenceLost) : std::error_code();
}

void DirBackend::run_heartbeat() {
  // A record is renewed once a sixth of the lease went by since its last renewal, at a beat
  // of a sixth: so never more than a third of the lease passes between two renewals (a
  // contender calls it stale after a whole lease unchanged: two more beats can be missed).
  const auto beat = std::max<Clock::duration>(fs_.config().lease / 6, milliseconds(10));
  util::MutexLock lock(mu_);
  while (!stopping_) {
    const auto next = Clock::now() + beat;
    while (!stopping_ && cv_.wait_until(mu_, next) == std::cv_status::no_timeout) {
    }
    if (stopping_) break;
    std::vector<std::shared_ptr<FsLock>> held(live_.begin(), live_.end());
    mu_.unlock();
    for (auto& fs : held) {
      util::MutexLock h(fs->mu);
      if (fs->lost || fs->released) continue;
      const auto now = Clock::now();
      if (now - fs->renewed < beat) continue;  // made or verified a moment ago
      std::error_code ec = fs_.renew(fs->hold);
      if (!ec) fs->renewed = now;
      if (ec == Errc::kFenceLost) {
        fs->lost = true;
        log_event("dir: lost '" + fs->hold.name +
                  "': its record was taken over (this process did not renew it in time); its "
                  "guard is fenced");
      } else if (ec) {
        log_event("dir: cannot renew '" + fs->hold.name + "': " + ec.message() +
                  " (tried again at the next beat)");
      }
    }
    {
      // Forget entry names not seen for a long while (the map only serves waiters).
      util::MutexLock s(seen_mu_);
      const auto old = Clock::now() - fs_.config().lease * 4;
      std::erase_if(seen_, [&](const auto& kv) { return kv.second < old; });
    }
    mu_.lock();
  }
}

std::error_code DirSession::acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                    uint64_t& epoch, void*& handle, bool* contended) {
  Handle* h = nullptr;
  last_error_.clear();
  std::error_code ec =
      backend_.acquire(name, mode, deadline, who_, epoch, h, contended, &last_error_);
  if (!ec) handle = h;
  return ec;
}

void DirSession::release(std::string_view, Mode, void* handle) noexcept {
  if (handle) backend_.release(static_cast<Handle*>(handle));
}

std::error_code DirSession::verify(std::string_view, uint64_t, void* handle) const noexcept {
  return backend_.verify(static_cast<Handle*>(handle));
}

}  // namespace

std::unique_ptr<Backend> make_dir_backend(const LockOptions& options) {
  return std::make_unique<DirBackend>(options);
}

}  // namespace kagi::lock
