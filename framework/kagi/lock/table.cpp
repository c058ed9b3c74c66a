#include <kagi/lock/table.hpp>

#include <kagi/lock/names.hpp>

#include <functional>
#include <vector>

namespace kagi::lock {
namespace {

enum class FileState : unsigned char { kNone, kShared, kExclusive };

struct Waiter {
  Mode mode = Mode::kShared;
  bool granted = false;  // guarded by the shard's mutex
  std::condition_variable cv;
  Waiter* prev = nullptr;
  Waiter* next = nullptr;
};

}  // namespace

// Every field is guarded by the mutex of the entry's shard, except `fd`, which only the
// thread that set `file_busy` touches until it clears it again.
struct LockTable::Entry {
  std::string name;
  Shard* shard = nullptr;  // set once, when the entry is made
  int shared = 0;          // in-process shared holders
  bool exclusive = false;  // an in-process exclusive holder
  int refs = 0;            // holders + waiters + callers in flight: the entry dies at 0
  Waiter* head = nullptr;  // FIFO of waiters
  Waiter* tail = nullptr;

  int fd = -1;  // pinned lock file descriptor, once someone needed the file lock
  FileState file = FileState::kNone;
  bool file_busy = false;  // a holder is taking the file lock right now
  std::condition_variable file_cv;
  // Idle: refs == 0 but kept, with its descriptor, for the next acquire of the name (the
  // shard's idle list, bounded). Not counted by size().
  bool idle = false;
  Entry* idle_newer = nullptr;
  Entry* idle_older = nullptr;
  int batch = 0;                 // grants served by the current file lock without a system call
  Clock::time_point file_since;  // the batch's first grant; zero until then

  void push(Waiter* w) {
    w->prev = tail;
    if (tail) {
      tail->next = w;
    } else {
      head = w;
    }
    tail = w;
  }
  void remove(Waiter* w) {
    (w->prev ? w->prev->next : head) = w->next;
    (w->next ? w->next->prev : tail) = w->prev;
    w->prev = w->next = nullptr;
  }
};

struct LockTable::Shard {
  std::mutex mu;
  std::unordered_map<std::string_view, std::unique_ptr<Entry>, NameHash> entries;  // guarded by mu
  // A few unused entries kept for reuse: saves an allocation per uncontended acquire.
  // Bounded (kSpares per shard); not counted by size().
  std::vector<std::unique_ptr<Entry>> spares;  // guarded by mu
  Entry* idle_newest = nullptr;                // guarded by mu
  Entry* idle_oldest = nullptr;                // guarded by mu
  size_t idle_count = 0;                       // guarded by mu

  void unlink_idle(Entry* e) {
    (e->idle_newer ? e->idle_newer->idle_older : idle_newest) = e->idle_older;
    (e->idle_older ? e->idle_older->idle_newer : idle_oldest) = e->idle_newer;
    e->idle_newer = e->idle_older = nullptr;
    e->idle = false;
    --idle_count;
  }
  void push_idle(Entry* e) {
    e->idle = true;
    e->idle_older = idle_newest;
    e->idle_newer = nullptr;
    (idle_newest ? idle_newest->idle_newer : idle_oldest) = e;
    idle_newest = e;
    ++idle_count;
  }
};

namespace {
constexpr size_t kSpares = 4;
}

LockTable::LockTable(FileLocks* files)
    : files_(files), max_idle_per_shard_(files ? 64 : 0), shards_(new Shard[kShards]) {}

LockTable::~LockTable() = default;

LockTable::Shard& LockTable::shard_for(std::string_view name) const {
  const uint64_t h = name_hash(name);
  return shards_[(h ^ (h >> 32)) % kShards];
}

size_t LockTable::size() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard lock(shards_[i].mu);
    n += shards_[i].entries.size() - shards_[i].idle_count;
  }
  return n;
}

size_t LockTable::waiting(std::string_view name) const {
  Shard& shard = shard_for(name);
  std::lock_guard lock(shard.mu);
  auto it = shard.entries.find(name);
  if (it == shard.entries.end() || it->second->idle) return 0;
  size_t n = 0;
  for (const Waiter* w = it->second->head; w; w = w->next) ++n;
  return n;
}

LockTable::Entry* LockTable::find_or_create(Shard& shard, std::string_view name) {
  auto& entries = shard.entries;
  auto& spares = shard.spares;
  auto it = entries.find(name);
  if (it != entries.end()) {
    if (it->second->idle) shard.unlink_idle(it->second.get());
    return it->second.get();
  }
  std::unique_ptr<LockTable::Entry> e;
  if (spares.empty()) {
    e = std::make_unique<LockTable::Entry>();
  } else {
    e = std::move(spares.back());
    spares.pop_back();
  }
  e->name.assign(name);
  e->shard = &shard;
  LockTable::Entry* raw = e.get();
  entries.emplace(raw->name, std::move(e));
  return raw;
}

namespace {

void take(LockTable::Entry* e, Mode mode) {
  if (mode == Mode::kExclusive) {
    e->exclusive = true;
  } else {
    ++e->shared;
  }
}

}  // namespace

// Does the current file lock's batch of system-call-free grants last? When it runs out, one
// probe decides: no writer of another process waiting → a new batch.
bool LockTable::batch_lasts(Entry* e) {
  const auto now = Clock::now();
  // The batch's clock starts at its first system-call-free grant, so that taking the file
  // lock (the uncontended path) reads no clock.
  if (e->file_since == Clock::time_point{}) e->file_since = now;
  if (e->batch < kMaxBatch && now - e->file_since < kMaxBatchHold) return true;
  if (files_->writer_waiting(e->fd)) return false;
  e->batch = 0;
  e->file_since = now;
  return true;
}

// May a shared request join the current shared holders without queueing?
bool LockTable::shared_may_join(Entry* e) {
  if (e->exclusive) return false;
  if (e->shared == 0 || !files_ || e->file == FileState::kNone) return true;
  return batch_lasts(e);
}

void LockTable::grant_waiters(Entry* e) {
  while (Waiter* w = e->head) {
    if (w->mode == Mode::kExclusive) {
      if (e->exclusive || e->shared > 0) return;
    } else if (!shared_may_join(e)) {
      return;
    }
    e->remove(w);
    take(e, w->mode);
    w->granted = true;
    w->cv.notify_one();
    if (w->mode == Mode::kExclusive) return;
  }
}

void LockTable::unref_locked(Shard& shard, Entry* e) {
  if (--e->refs > 0) return;
  if (e->fd >= 0 && max_idle_per_shard_ > 0) {
    // Keep it, descriptor and all: the next acquire of this name needs no allocation, no map
    // insert and no descriptor lookup. The oldest idle entry goes when there are too many.
    shard.push_idle(e);
    if (shard.idle_count <= max_idle_per_shard_) return;
    e = shard.idle_oldest;
    shard.unlink_idle(e);
  }
  if (e->fd >= 0) files_->unpin(e->name, e->fd);
  auto it = shard.entries.find(std::string_view(e->name));
  std::unique_ptr<Entry> dead = std::move(it->second);
  shard.entries.erase(it);
  if (shard.spares.size() < kSpares) {
    // Reset to a fresh entry's state (no holders, no waiters, no file).
    dead->fd = -1;
    dead->file = FileState::kNone;
    dead->batch = 0;
    shard.spares.push_back(std::move(dead));
  }
  // A burst of distinct names grows the bucket array; give it back once the shard is idle.
  if (shard.entries.empty() && shard.entries.bucket_count() > 1024) {
    std::unordered_map<std::string_view, std::unique_ptr<Entry>, NameHash>().swap(shard.entries);
  }
}

// Inlined into acquire/try_acquire: one frame less above the flock (see LOCKING.md).
[[gnu::always_inline]] inline std::error_code LockTable::ensure_file(
    Shard& shard, std::unique_lock<std::mutex>& lock, Entry* e, Mode mode,
    Clock::time_point deadline, bool try_only, bool* contended) {
  (void)shard;
  if (!files_) return {};
  for (;;) {
    if (e->file == FileState::kExclusive ||
        (e->file == FileState::kShared && mode == Mode::kShared)) {
      ++e->batch;
      return {};
    }
    if (e->file_busy) {
      // Another holder of this process is taking the file lock; its result serves us too.
      if (try_only) return make_error_code(Errc::kTimeout);
      if (contended) *contended = true;
      if (e->file_cv.wait_until(lock, deadline) == std::cv_status::timeout && e->file_busy) {
        return make_error_code(Errc::kTimeout);
      }
      continue;
    }
    if (e->fd >= 0) {
      // The descriptor is known: one non-blocking try right here, without giving up the
      // shard mutex (the uncontended case; it never blocks).
      std::error_code ec = files_->try_lock(e->fd, mode);
      if (!ec) {
        e->file = mode == Mode::kShared ? FileState::kShared : FileState::kExclusive;
        e->batch = 0;
        e->file_since = {};
        return {};
      }
      if (ec != Errc::kTimeout) return ec;
      if (try_only) return ec;
    }
    e->file_busy = true;
    lock.unlock();
    std::error_code ec;
    if (e->fd < 0) ec = files_->pin(e->name, e->fd);
    if (!ec) {
      ec = files_->lock(e->fd, mode, try_only ? Clock::time_point::min() : deadline, contended);
    }
    lock.lock();
    e->file_busy = false;
    e->file_cv.notify_all();
    if (ec) return ec;
    e->file = mode == Mode::kShared ? FileState::kShared : FileState::kExclusive;
    e->batch = 0;
    e->file_since = {};
    return {};
  }
}

std::error_code LockTable::acquire(std::string_view name, Mode mode, Clock::time_point deadline,
                                   Grant& out, bool* contended) {
  Shard& shard = shard_for(name);
  std::unique_lock lock(shard.mu);
  Entry* e = find_or_create(shard, name);
  ++e->refs;
  const bool now =
      !e->head && (mode == Mode::kExclusive ? !e->exclusive && e->shared == 0 : shared_may_join(e));
  if (now) {
    take(e, mode);
  } else {
    if (contended) *contended = true;
    Waiter w;
    w.mode = mode;
    e->push(&w);
    while (!w.granted) {
      if (w.cv.wait_until(lock, deadline) == std::cv_status::timeout && !w.granted) {
        e->remove(&w);
        grant_waiters(e);  // a timed-out writer at the head may have held readers back
        unref_locked(shard, e);
        return make_error_code(Errc::kTimeout);
      }
    }
  }
  if (auto ec = ensure_file(shard, lock, e, mode, deadline, false, contended)) {
    release_locked(shard, e, mode);
    return ec;
  }
  out.entry = e;
  out.mode = mode;
  return {};
}

std::error_code LockTable::try_acquire(std::string_view name, Mode mode, Grant& out) {
  Shard& shard = shard_for(name);
  std::unique_lock lock(shard.mu);
  Entry* e = find_or_create(shard, name);
  ++e->refs;
  const bool now =
      !e->head && (mode == Mode::kExclusive ? !e->exclusive && e->shared == 0 : shared_may_join(e));
  if (!now) {
    unref_locked(shard, e);
    return make_error_code(Errc::kTimeout);
  }
  take(e, mode);
  if (auto ec = ensure_file(shard, lock, e, mode, Clock::time_point::min(), true, nullptr)) {
    release_locked(shard, e, mode);
    return ec;
  }
  out.entry = e;
  out.mode = mode;
  return {};
}

// Inlined into its callers: one frame less above the flock (see LOCKING.md).
[[gnu::always_inline]] inline void LockTable::release_locked(Shard& shard, Entry* e, Mode mode) {
  if (mode == Mode::kExclusive) {
    e->exclusive = false;
  } else {
    --e->shared;
  }
  if (e->shared == 0 && !e->exclusive) {
    // Hand the file lock to the next waiter without system calls if it covers the waiter's
    // mode and the batch lasts; otherwise give other processes their turn.
    if (e->file != FileState::kNone) {
      const bool keep = e->head &&
                        (e->file == FileState::kExclusive || e->head->mode == Mode::kShared) &&
                        batch_lasts(e);
      if (!keep) {
        files_->unlock(e->fd);
        e->file = FileState::kNone;
      }
    }
    grant_waiters(e);
  }
  unref_locked(shard, e);
}

void LockTable::release(Grant& grant) {
  if (!grant.entry) return;
  Shard& shard = *grant.entry->shard;
  std::lock_guard lock(shard.mu);
  release_locked(shard, grant.entry, grant.mode);
  grant.entry = nullptr;
}

}  // namespace kagi::lock
