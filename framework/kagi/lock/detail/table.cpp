#include <kagi/lock/detail/table.hpp>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <kagi/lock/detail/intrusive_list.hpp>
#include <kagi/lock/detail/names.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::lock {
namespace {

enum class FileState : unsigned char { kNone, kShared, kExclusive };

FileState file_state(Mode mode) {
  return mode == Mode::kShared ? FileState::kShared : FileState::kExclusive;
}

struct IdleTag;

// A thread waiting for a name: lives on that thread's stack, queued in its entry.
struct Waiter : detail::ListNode<Waiter> {
  Waiter(util::Mutex& shard_mu, Mode m) : mu(shard_mu), mode(m), since(Clock::now()) {}
  util::Mutex& mu;  // the shard's
  const Mode mode;
  const Clock::time_point since;  // when it queued: how long running threads may overtake it
  bool granted KAGI_GUARDED_BY(mu) = false;
  util::CondVar cv;
};

// A few unused entries per shard are kept for reuse: saves an allocation per uncontended
// acquire of a name that is not cached.
constexpr size_t kSpares = 4;

}  // namespace

struct LockTable::Shard {
  Clock::duration overtake_window{};  // the table's; set once, before any use
  util::Mutex mu;
  std::unordered_map<std::string_view, std::unique_ptr<Entry>, NameHash> entries
      KAGI_GUARDED_BY(mu);
  // Entries nobody holds or waits for, kept with their open descriptor (the descriptor
  // cache), oldest first. They stay in `entries`; size() does not count them.
  detail::IntrusiveList<Entry, IdleTag> idle KAGI_GUARDED_BY(mu);
  std::vector<std::unique_ptr<Entry>> spares KAGI_GUARDED_BY(mu);
};

// One name's state. Every field is guarded by its shard's mutex; the links are the idle
// list's (also under that mutex).
struct LockTable::Entry : detail::ListNode<Entry, IdleTag> {
  explicit Entry(Shard* s) : shard(s) {}
  Shard* const shard;
  std::string name KAGI_GUARDED_BY(shard->mu);        // the key in shard->entries points into it
  int shared KAGI_GUARDED_BY(shard->mu) = 0;          // in-process shared holders
  bool exclusive KAGI_GUARDED_BY(shard->mu) = false;  // an in-process exclusive holder
  // Holders + waiters + callers in flight: at 0 the entry goes idle (or dies).
  int refs KAGI_GUARDED_BY(shard->mu) = 0;
  bool idle KAGI_GUARDED_BY(shard->mu) = false;                      // in shard->idle
  detail::IntrusiveList<Waiter> waiters KAGI_GUARDED_BY(shard->mu);  // FIFO
  // The name is free and its first waiter (a writer) was woken to take it, and has not run
  // yet: the next release need not wake it again.
  bool head_woken KAGI_GUARDED_BY(shard->mu) = false;

  // The lock file, once someone needed the file lock; kept while the entry lives.
  util::UniqueFd fd KAGI_GUARDED_BY(shard->mu);
  FileState file KAGI_GUARDED_BY(shard->mu) = FileState::kNone;
  // A holder is opening or taking the file lock right now, with the mutex released; others
  // that need the file lock wait on file_cv for its result.
  bool file_busy KAGI_GUARDED_BY(shard->mu) = false;
  util::CondVar file_cv;
  // Grants served by the current file lock without a system call, and the first one's time
  // (zero until then).
  int batch KAGI_GUARDED_BY(shard->mu) = 0;
  Clock::time_point file_since KAGI_GUARDED_BY(shard->mu);
  // When this process last let the file lock go because a batch ran out with another
  // process's waiter marked (zero: it did not, or that yield was served): until that waiter
  // has taken it, this process's threads must not take it back (see ensure_file).
  Clock::time_point yielded_at KAGI_GUARDED_BY(shard->mu);
  // A yield's waiter never took the lock within the bound (a stopped process keeps its mark):
  // further yields are not waited for until a batch's probe finds nobody waiting.
  bool yield_unanswered KAGI_GUARDED_BY(shard->mu) = false;
};

namespace {

using Entry = LockTable::Entry;

void take(Entry* e, Mode mode) KAGI_REQUIRES(e->shard->mu) {
  if (mode == Mode::kExclusive) {
    e->exclusive = true;
  } else {
    ++e->shared;
  }
}

// Does the current file lock's batch of system-call-free grants last? When it runs out, one
// probe decides: no writer of another process waiting → a new batch.
bool batch_lasts(Entry* e) KAGI_REQUIRES(e->shard->mu) {
  const auto now = Clock::now();
  // The batch's clock starts at its first system-call-free grant, so that taking the file
  // lock (the uncontended path) reads no clock.
  if (e->file_since == Clock::time_point{}) e->file_since = now;
  if (e->batch < LockTable::kMaxBatch && now - e->file_since < LockTable::kMaxBatchHold) {
    return true;
  }
  if (FileLocks::writer_waiting(e->fd.get())) return false;
  e->yield_unanswered = false;
  e->batch = 0;
  e->file_since = now;
  return true;
}

// May a request in `mode` be granted now, without queueing?
bool may_take(Entry* e, Mode mode) KAGI_REQUIRES(e->shard->mu) {
  if (e->exclusive) return false;
  if (mode == Mode::kExclusive) return e->shared == 0;
  // Joining other shared holders: within the file lock's batch (always, in-process only).
  if (e->shared == 0 || e->file == FileState::kNone) return true;
  return batch_lasts(e);
}

// May running writers take the free name ahead of `head`? Only ahead of a writer (readers at
// the head are granted together on release, never left waiting for a free name), and only
// while it has waited less than the table's overtake window.
bool overtakable(const Entry* e, const Waiter* head) {
  return head->mode == Mode::kExclusive && Clock::now() - head->since < e->shard->overtake_window;
}

// May a request in `mode`, arriving now, go ahead of the queue (empty, or overtakable)?
bool may_overtake(Entry* e, Mode mode) KAGI_REQUIRES(e->shard->mu) {
  const Waiter* head = e->waiters.front();
  if (!head) return true;
  return mode == Mode::kExclusive && !e->exclusive && e->shared == 0 && overtakable(e, head);
}

void grant_waiters(Entry* e) KAGI_REQUIRES(e->shard->mu) {
  while (Waiter* w = e->waiters.front()) {
    if (!may_take(e, w->mode)) return;
    e->waiters.remove(w);
    e->head_woken = false;  // whoever was woken at the head is served
    take(e, w->mode);
    w->mu.assert_held();  // the same mutex as e->shard->mu, under another name
    w->granted = true;
    w->cv.notify_one();
    if (w->mode == Mode::kExclusive) return;
  }
}

// Drops one reference; at zero the entry goes to the idle list (with its descriptor, up to
// `max_idle` per shard) or is erased.
void unref(Entry* e, size_t max_idle) KAGI_REQUIRES(e->shard->mu) {
  if (--e->refs > 0) return;
  LockTable::Shard& shard = *e->shard;
  shard.mu.assert_held();  // the same mutex as e->shard->mu
  if (e->fd && max_idle > 0) {
    // Keep it, descriptor and all: the next acquire of this name needs no allocation, no map
    // insert and no open(). The oldest idle entry goes when there are too many.
    e->idle = true;
    shard.idle.push_back(e);
    if (shard.idle.size() <= max_idle) return;
    e = shard.idle.front();
    e->shard->mu.assert_held();  // e->shard is &shard: entries never change shards
    shard.idle.remove(e);
    e->idle = false;
  }
  auto it = shard.entries.find(std::string_view(e->name));
  std::unique_ptr<Entry> dead = std::move(it->second);
  dead->shard->mu.assert_held();  // dead->shard is &shard
  shard.entries.erase(it);
  dead->fd.reset();  // the descriptor cache ends here
  if (shard.spares.size() < kSpares) {
    // Back to a fresh entry's state: no holders, no waiters (refs is 0), no file.
    dead->file = FileState::kNone;
    dead->batch = 0;
    dead->file_since = {};
    dead->yielded_at = {};
    dead->yield_unanswered = false;
    shard.spares.push_back(std::move(dead));
  }
  // A burst of distinct names grows the bucket array; give it back once the shard is idle.
  if (shard.entries.empty() && shard.entries.bucket_count() > 1024) {
    std::unordered_map<std::string_view, std::unique_ptr<Entry>, NameHash>().swap(shard.entries);
  }
}

Entry* find_or_create(LockTable::Shard& shard, std::string_view name) KAGI_REQUIRES(shard.mu) {
  auto it = shard.entries.find(name);
  if (it != shard.entries.end()) {
    Entry* e = it->second.get();
    e->shard->mu.assert_held();  // e->shard is &shard
    if (e->idle) {
      shard.idle.remove(e);
      e->idle = false;
    }
    return e;
  }
  std::unique_ptr<Entry> e;
  if (shard.spares.empty()) {
    e = std::make_unique<Entry>(&shard);
  } else {
    e = std::move(shard.spares.back());
    shard.spares.pop_back();
  }
  Entry* raw = e.get();
  raw->shard->mu.assert_held();  // raw->shard is &shard
  raw->name.assign(name);
  shard.entries.emplace(raw->name, std::move(e));
  return raw;
}

// Until when must the next taker of `e`'s file lock leave it to the other process's waiter
// this process yielded to (zero: it need not)? A waiting call gives the waiter up to
// kMaxBatchHold, a batch's own bound, to be scheduled and take the lock.
Clock::time_point leave_to_other_process_until(Entry* e, bool no_wait) KAGI_REQUIRES(e->shard->mu) {
  if (e->yielded_at == Clock::time_point{} || no_wait) return {};
  const Clock::time_point until = e->yielded_at + LockTable::kMaxBatchHold;
  return Clock::now() < until ? until : Clock::time_point{};
}

// The in-process grant is made: now make sure this process holds the file lock in a mode
// that covers `mode`. The shard mutex is released while opening the file or waiting for it.
std::error_code ensure_file(FileLocks* files, Entry* e, std::string_view name, Mode mode,
                            Clock::time_point deadline, bool* contended)
    KAGI_REQUIRES(e->shard->mu) {
  if (!files) return {};
  const bool no_wait = deadline == LockTable::kNoWait;
  for (;;) {
    if (e->file == FileState::kExclusive ||
        (e->file == FileState::kShared && mode == Mode::kShared)) {
      ++e->batch;
      return {};
    }
    if (e->file_busy) {
      // Another holder of this process is taking the file lock; its result serves us too.
      if (no_wait) return make_error_code(Errc::kTimeout);
      if (contended) *contended = true;
      if (e->file_cv.wait_until(e->shard->mu, deadline) == std::cv_status::timeout &&
          e->file_busy) {
        return make_error_code(Errc::kTimeout);
      }
      continue;
    }
    const Clock::time_point leave_until = leave_to_other_process_until(e, no_wait);
    if (e->fd && leave_until == Clock::time_point{}) {
      // The descriptor is known: one non-blocking try right here, without giving up the
      // shard mutex (the uncontended case; it never blocks).
      std::error_code ec = FileLocks::try_lock(e->fd.get(), mode);
      if (!ec) break;
      if (ec != Errc::kTimeout || no_wait) return ec;
    }
    // Open the file and/or wait for it with the mutex released; file_busy keeps other
    // holders of this process off the descriptor meanwhile.
    e->file_busy = true;
    e->yielded_at = {};  // this taker serves the yield
    int fd = e->fd.get();
    e->shard->mu.unlock();
    util::UniqueFd opened;
    std::error_code ec;
    bool unanswered = false;
    if (fd < 0) {
      ec = files->open(name, opened);
      fd = opened.get();
    } else if (leave_until != Clock::time_point{}) {
      using Others = FileLocks::OtherWaiters;
      const Others others = FileLocks::await_other_waiters(fd, std::min(leave_until, deadline));
      if (others != Others::kNone && contended) *contended = true;
      unanswered = others == Others::kStillWaiting && leave_until <= deadline;
    }
    if (!ec) ec = files->lock(fd, mode, deadline, contended);
    e->shard->mu.lock();
    if (unanswered) e->yield_unanswered = true;
    if (opened) e->fd = std::move(opened);
    e->file_busy = false;
    e->file_cv.notify_all();
    if (ec) return ec;
    break;
  }
  e->file = file_state(mode);
  e->batch = 0;
  e->file_since = {};
  return {};
}

// Nobody of this process holds the name any more: let the queue move.
void name_freed(Entry* e) KAGI_REQUIRES(e->shard->mu) {
  Waiter* next = e->waiters.front();
  // Keep the file lock for the next waiter (no system calls) if it covers the waiter's mode
  // and the batch lasts; otherwise give other processes their turn.
  if (e->file != FileState::kNone) {
    const bool covers_next =
        next && (e->file == FileState::kExclusive || next->mode == Mode::kShared);
    if (!covers_next || !batch_lasts(e)) {
      FileLocks::unlock(e->fd.get());
      e->file = FileState::kNone;
      // A batch ran out with another process's waiter marked: the lock is owed to it.
      if (covers_next && !e->yield_unanswered) e->yielded_at = Clock::now();
    }
  }
  if (!next) return;
  if (overtakable(e, next)) {
    // Wake the writer to take the name itself, and leave it free meanwhile: a thread that is
    // running may take it first (see may_overtake), instead of every release waiting for a
    // sleeping thread to be scheduled.
    if (!e->head_woken) {
      e->head_woken = true;
      next->mu.assert_held();  // the same mutex as e->shard->mu, under another name
      next->cv.notify_one();
    }
    return;
  }
  grant_waiters(e);  // strict arrival order: readers, and writers overtaken long enough
}

void release_locked(Entry* e, Mode mode, size_t max_idle) KAGI_REQUIRES(e->shard->mu) {
  if (mode == Mode::kExclusive) {
    e->exclusive = false;
  } else {
    --e->shared;
  }
  if (e->shared == 0 && !e->exclusive) name_freed(e);
  unref(e, max_idle);
}

}  // namespace

LockTable::LockTable(FileLocks* files, size_t max_idle_fds, Clock::duration overtake_window)
    : files_(files),
      max_idle_per_shard_(files ? (max_idle_fds + kShards - 1) / kShards : 0),
      shards_(new Shard[kShards]) {
  for (size_t i = 0; i < kShards; ++i) shards_[i].overtake_window = overtake_window;
}

LockTable::~LockTable() = default;

LockTable::Shard& LockTable::shard_for(std::string_view name) const {
  const uint64_t h = name_hash(name);
  return shards_[(h ^ (h >> 32)) % kShards];
}

size_t LockTable::size() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    util::MutexLock lock(shards_[i].mu);
    n += shards_[i].entries.size() - shards_[i].idle.size();
  }
  return n;
}

size_t LockTable::open_fds() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    Shard& shard = shards_[i];
    util::MutexLock lock(shard.mu);
    for (const auto& [name, e] : shard.entries) {
      e->shard->mu.assert_held();  // e->shard is &shard
      if (e->fd) ++n;
    }
  }
  return n;
}

size_t LockTable::waiting(std::string_view name) const {
  Shard& shard = shard_for(name);
  util::MutexLock lock(shard.mu);
  auto it = shard.entries.find(name);
  if (it == shard.entries.end()) return 0;
  it->second->shard->mu.assert_held();  // the entry's shard is `shard`
  return it->second->waiters.size();
}

std::error_code LockTable::acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                   Grant& out, bool* contended) {
  Shard& shard = shard_for(name);
  util::MutexLock lock(shard.mu);
  Entry* e = find_or_create(shard, name);
  e->shard->mu.assert_held();  // e->shard is &shard
  ++e->refs;
  if (may_overtake(e, mode) && may_take(e, mode)) {
    take(e, mode);
  } else {
    if (deadline == kNoWait) {
      unref(e, max_idle_per_shard_);
      return make_error_code(Errc::kTimeout);
    }
    if (contended) *contended = true;
    Waiter w(shard.mu, mode);
    w.mu.assert_held();  // w.mu is shard.mu
    e->waiters.push_back(&w);
    while (!w.granted) {
      const std::cv_status woke = w.cv.wait_until(shard.mu, deadline);
      if (w.granted) break;
      if (e->waiters.front() == &w) {
        // Woken to take the free name (or by chance): take it if nobody overtook us.
        e->head_woken = false;
        if (may_take(e, mode)) {
          e->waiters.remove(&w);
          take(e, mode);
          w.granted = true;
          break;
        }
      }
      if (woke == std::cv_status::timeout) {
        e->waiters.remove(&w);
        // A timed-out writer at the head may have held readers back, or been the one woken
        // to take the free name.
        if (e->shared == 0 && !e->exclusive) {
          name_freed(e);
        } else {
          grant_waiters(e);
        }
        unref(e, max_idle_per_shard_);
        return make_error_code(Errc::kTimeout);
      }
    }
  }
  if (auto ec = ensure_file(files_, e, name, mode, deadline, contended)) {
    release_locked(e, mode, max_idle_per_shard_);
    return ec;
  }
  out.entry = e;
  out.mode = mode;
  return {};
}

void LockTable::release(Grant& grant) {
  if (!grant.entry) return;
  Entry* e = grant.entry;
  util::MutexLock lock(e->shard->mu);
  release_locked(e, grant.mode, max_idle_per_shard_);
  grant.entry = nullptr;
}

}  // namespace kagi::lock
