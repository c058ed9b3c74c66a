#include <kagi/store/detail/group_sync.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include <kagi/store/detail/file_io.hpp>

namespace kagi::store::detail {

namespace {

// Past this many files the durable map starts over: forgetting only costs a reader one more
// (cheap, clean) fsync.
constexpr size_t kMaxRemembered = 65536;

}  // namespace

size_t FileIdHash::operator()(const FileId& id) const noexcept {
  size_t h = std::hash<uint64_t>{}(static_cast<uint64_t>(id.ino));
  h ^= std::hash<uint64_t>{}(static_cast<uint64_t>(id.dev)) + 0x9e3779b97f4a7c15ULL + (h << 6);
  h ^= std::hash<int64_t>{}(id.birth_ns) + 0x9e3779b97f4a7c15ULL + (h << 6);
  return h;
}

bool GroupSync::durable(const FileId& id, uint64_t end) const {
  util::MutexLock lock(mu_);
  auto it = durable_.find(id);
  return it != durable_.end() && it->second >= end;
}

void GroupSync::mark(const FileId& id, uint64_t end) {
  util::MutexLock lock(mu_);
  mark_locked(id, end);
}

void GroupSync::mark_locked(const FileId& id, uint64_t end) {
  if (durable_.size() >= kMaxRemembered && !durable_.contains(id)) durable_.clear();
  uint64_t& known = durable_[id];
  known = std::max(known, end);
}

uint64_t GroupSync::flushes() const {
  util::MutexLock lock(mu_);
  return flushes_;
}

Status GroupSync::sync(std::vector<SyncNeed> needs) {
  util::MutexLock lock(mu_);
  Status first;
  for (SyncNeed& need : needs) {
    auto it = durable_.find(need.id);
    if (it != durable_.end() && it->second >= need.end) continue;
    if (Status s = sync_one(std::move(need)); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status GroupSync::sync_one(SyncNeed need) {
  const FileId id = need.id;
  FileQueue& queue = queues_[id];
  if (!queue.collecting) queue.collecting = std::make_shared<Batch>();
  std::shared_ptr<Batch> batch = queue.collecting;
  if (!batch->fd) {
    batch->fd = std::move(need.fd);
    batch->path = std::move(need.path);
  }
  batch->end = std::max(batch->end, need.end);
  while (!batch->done) {
    FileQueue& q = queues_[id];  // the map may have rehashed while we waited
    if (q.flushing) {
      flushed_.wait(mu_);
      continue;
    }
    // No flush of this file runs, so ours is its batch being collected: flush it, and let the
    // next requests collect in a new one meanwhile.
    q.flushing = true;
    q.collecting.reset();
    mu_.unlock();
    const int r = fs_.fsync(batch->fd.get());
    mu_.lock();
    batch->error = r < 0 ? -r : 0;
    batch->fd.reset();
    batch->done = true;
    ++flushes_;
    if (batch->error == 0) mark_locked(id, batch->end);
    FileQueue& after = queues_[id];
    after.flushing = false;
    if (!after.collecting) queues_.erase(id);  // nobody waits: the map keeps only live files
    flushed_.notify_all();
  }
  if (batch->error != 0)
    return Status::failed(sys_error(-batch->error), "flush", batch->path, "fsync");
  return {};
}

}  // namespace kagi::store::detail
