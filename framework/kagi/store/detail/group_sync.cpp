#include <kagi/store/detail/group_sync.hpp>

#include <algorithm>
#include <functional>
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
  std::vector<SyncNeed> open;
  for (SyncNeed& need : needs) {
    auto it = durable_.find(need.id);
    if (it == durable_.end() || it->second < need.end) open.push_back(std::move(need));
  }
  needs.swap(open);
  if (needs.empty()) return {};
  if (!collecting_) collecting_ = std::make_shared<Batch>();
  std::shared_ptr<Batch> batch = collecting_;
  for (SyncNeed& need : needs) {
    Entry& entry = batch->files[need.id];
    if (!entry.fd) {
      entry.fd = std::move(need.fd);
      entry.path = std::move(need.path);
    }
    entry.end = std::max(entry.end, need.end);
  }
  while (!batch->done) {
    if (flushing_) {
      flushed_.wait(mu_);
      continue;
    }
    // No flush runs, so ours is the batch being collected: flush it, and let the next
    // requests collect in a new one meanwhile.
    flushing_ = true;
    collecting_.reset();
    flush(*batch);
    batch->done = true;
    flushing_ = false;
    flushed_.notify_all();
  }
  for (const SyncNeed& need : needs) {
    const Entry& entry = batch->files.at(need.id);
    if (entry.error != 0) {
      return Status::failed(sys_error(-entry.error), "flush", entry.path, "fsync");
    }
  }
  return {};
}

// Runs the fsyncs with the mutex released (requests keep joining the next batch meanwhile).
void GroupSync::flush(Batch& batch) {
  mu_.unlock();
  uint64_t calls = 0;
  for (auto& [id, entry] : batch.files) {
    const int r = fs_.fsync(entry.fd.get());
    entry.error = r < 0 ? -r : 0;
    entry.fd.reset();
    ++calls;
  }
  mu_.lock();
  flushes_ += calls;
  for (const auto& [id, entry] : batch.files) {
    if (entry.error == 0) mark_locked(id, entry.end);
  }
}

}  // namespace kagi::store::detail
