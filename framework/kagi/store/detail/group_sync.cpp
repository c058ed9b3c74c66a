#include <kagi/store/detail/group_sync.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/detail/journal.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store::detail {

namespace {

// Past this many files the durable map starts over: forgetting only costs a reader one more
// (cheap, clean) fsync.
constexpr size_t kMaxRemembered = 65536;

// "flush <path>: <call>: <error>".
Status flush_failed(int error, std::string_view path, const char* call) {
  return Status::failed(sys_error(-error), "flush", path, call);
}

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
  if (failed_.contains(id)) return;
  if (durable_.size() >= kMaxRemembered && !durable_.contains(id)) durable_.clear();
  uint64_t& known = durable_[id];
  known = std::max(known, end);
}

Status GroupSync::failed_flush(const FileId& id, std::string_view path) const {
  // Every durable append asks: no lock while no flush has ever failed (the usual case).
  if (!any_failed_.load(std::memory_order_acquire)) return {};
  util::MutexLock lock(mu_);
  return failed_flush_locked(id, path);
}

Status GroupSync::failed_flush_locked(const FileId& id, std::string_view path) const {
  auto it = failed_.find(id);
  if (it == failed_.end()) return {};
  return Status::failed(sys_error(-it->second.error), "flush", path,
                        std::string("an earlier ") + it->second.call +
                            " of this log failed, so nothing written to it since can be made "
                            "durable (refused until kagi restarts; docs/STORAGE.md)");
}

void GroupSync::fail(const FileId& id, int error, std::string_view path) {
  util::MutexLock lock(mu_);
  fail_locked(id, error, "fsync", path);
}

void GroupSync::fail_locked(const FileId& id, int error, const char* call, std::string_view path) {
  if (!failed_.emplace(id, Failure{error, call}).second) return;
  any_failed_.store(true, std::memory_order_release);
  util::log_error("store: " + flush_failed(error, path, call).message() +
                  ": the kernel may have dropped what it could not write, so kagi refuses this "
                  "log's writes and unflushed reads until it restarts. Check the disk "
                  "(docs/STORAGE.md, group commit)");
}

StoreStats GroupSync::stats() const {
  StoreStats out;
  {
    util::MutexLock lock(mu_);
    out = stats_;
    out.round_flush_us = round_flush_ns_ / 1000;  // summed in ns: rounds of < 1 µs add up
  }
  out.journal_checkpoints = journal_ ? journal_->checkpoints() : 0;
  return out;
}

bool GroupSync::little_else_dirty() {
  if (options_.syncfs_max_dirty_bytes == 0) return true;
  const int64_t dirty = fs_.dirty_bytes();
  return dirty >= 0 && static_cast<uint64_t>(dirty) <= options_.syncfs_max_dirty_bytes;
}

GroupSync::GroupSync(FileSystem& fs, GroupSyncOptions options) : fs_(fs), options_(options) {}

void GroupSync::use_journal(std::unique_ptr<Journal> journal) { journal_ = std::move(journal); }

GroupSync::~GroupSync() {
  std::thread flusher;
  {
    util::MutexLock lock(mu_);
    stop_ = true;
    flusher.swap(flusher_);
  }
  work_.notify_all();
  if (flusher.joinable()) flusher.join();
}

void GroupSync::submit(std::vector<SyncNeed> needs, std::function<void(Status)> done) {
  std::vector<Submitted> here;  // flushed on this thread: the flush thread, or stopping
  Status refused;
  {
    util::MutexLock lock(mu_);
    std::vector<SyncNeed> open;
    for (SyncNeed& need : needs) {
      auto it = durable_.find(need.id);
      if (it != durable_.end() && it->second >= need.end) continue;
      if (Status s = failed_flush_locked(need.id, need.path); !s.ok()) {
        if (refused.ok()) refused = std::move(s);
        continue;
      }
      open.push_back(std::move(need));
    }
    if (!refused.ok()) {
      // No flush can make this request's records durable: answered below, at once.
    } else if (open.empty()) {
      // Nothing to flush: answered below.
    } else if (stop_ || std::this_thread::get_id() == flusher_id_) {
      here.push_back(Submitted{std::move(open), std::move(done)});
    } else {
      submitted_.push_back(Submitted{std::move(open), std::move(done)});
      if (!flusher_.joinable()) {
        flusher_ = std::thread([this] { flush_loop(); });
        flusher_id_ = flusher_.get_id();
      }
      if (!batching_ || submitted_.size() >= kBatchFull) work_.notify_one();
      return;
    }
  }
  if (here.empty()) return done(std::move(refused));
  (void)flush_round(here);
}

void GroupSync::drain() {
  util::MutexLock lock(mu_);
  while (!submitted_.empty() || flushing_round_) idle_.wait(mu_);
}

void GroupSync::flush_loop() {
  for (;;) {
    std::vector<Submitted> round;
    {
      util::MutexLock lock(mu_);
      while (submitted_.empty() && !stop_) work_.wait(mu_);
      if (submitted_.empty()) return;  // stopping, and nothing is left
      // Batching, as ext4's journal does for its commits: while requests come from several
      // threads, wait for more of them to join, as long as a flush has lately taken (at most
      // options_.max_batch_wait). A flush costs about the same for one request as for twenty.
      if (last_round_requests_ > 1 && flush_ns_ > 0) {
        const auto deadline = std::chrono::steady_clock::now() +
                              std::min<std::chrono::nanoseconds>(
                                  std::chrono::nanoseconds(flush_ns_), options_.max_batch_wait);
        batching_ = true;  // submit() wakes this thread only when the round is full
        while (!stop_ && submitted_.size() < kBatchFull &&
               work_.wait_until(mu_, deadline) != std::cv_status::timeout) {
        }
        batching_ = false;
      }
      round.swap(submitted_);
      last_round_requests_ = round.size();
      flushing_round_ = true;
    }
    const int64_t took = flush_round(round);
    {
      util::MutexLock lock(mu_);
      flushing_round_ = false;
      flush_ns_ = flush_ns_ == 0 ? took : (flush_ns_ * 7 + took) / 8;
    }
    idle_.notify_all();
  }
}

struct GroupSync::RoundFile {
  FileId id;
  int fd = -1;  // owned by one of the needs
  uint64_t end = 0;
  const std::string* path = nullptr;
  bool journaled = false;  // made durable through the journal
  int error = 0;
  const char* call = "fsync";  // what flushed it, for the error message
  Status status;               // what its requests are told, decided once the calls are made
};

void GroupSync::journal_round(std::vector<RoundFile*>& files) {
  if (!journal_ || journal_->broken()) return;
  // Where each file's durable part ends, as far as this process knows: the entry starts there.
  std::vector<std::pair<RoundFile*, uint64_t>> candidates;
  {
    util::MutexLock lock(mu_);
    for (RoundFile* f : files) {
      if (f->id.dev != journal_->dev() || f->id.birth_ns == 0) continue;
      auto it = durable_.find(f->id);
      if (it != durable_.end()) candidates.emplace_back(f, it->second);
    }
  }
  std::vector<JournalEntry> entries;
  std::vector<RoundFile*> covered;
  uint64_t room = journal_->room();
  for (auto [f, from] : candidates) {
    if (from >= f->end) {
      f->journaled = true;  // already durable: a round before this one covered it
      continue;
    }
    JournalEntry e{.dev = f->id.dev,
                   .ino = f->id.ino,
                   .birth_ns = f->id.birth_ns,
                   .path = *f->path,
                   .offset = from,
                   .bytes = {}};
    const uint64_t size = kJournalEntryHeaderSize + e.path.size() + (f->end - from);
    if (size > room) continue;  // too much for the journal: flushed by its own call
    if (read_from(fs_, f->fd, static_cast<off_t>(from), e.bytes, static_cast<off_t>(f->end)) < 0 ||
        e.bytes.size() != f->end - from) {
      continue;  // its own flush will say what is wrong
    }
    room -= size;
    entries.push_back(std::move(e));
    covered.push_back(f);
  }
  if (entries.empty()) return;
  if (Status s = journal_->write(entries); !s.ok()) {
    util::log_error("store: " + s.message() +
                    ": group commit flushes the logs themselves until kagi restarts");
    for (RoundFile* f : covered) f->journaled = false;
    return;
  }
  for (RoundFile* f : covered) {
    f->journaled = true;
    f->call = "journal";
  }
  util::MutexLock lock(mu_);
  ++stats_.flushes;
  ++stats_.journal_rounds;
}

int64_t GroupSync::flush_round(std::vector<Submitted>& round) {
  using File = RoundFile;
  std::unordered_map<FileId, File, FileIdHash> files;
  for (const Submitted& s : round) {
    for (const SyncNeed& need : s.needs) {
      File& f = files[need.id];
      if (f.fd < 0) {
        f.id = need.id;
        f.fd = need.fd.get();
        f.path = &need.path;
      }
      f.end = std::max(f.end, need.end);
    }
  }
  const auto started = std::chrono::steady_clock::now();
  std::vector<File*> own;  // flushed by a call of their own (or a syncfs), not the journal
  for (auto& [id, f] : files) own.push_back(&f);
  journal_round(own);
  std::erase_if(own, [](const File* f) { return f->journaled; });
  uint64_t calls = 0;
  bool declined = false;
  std::vector<File*> each;  // flushed by an fsync of their own
  if (options_.syncfs_min_files == 0 || own.size() < options_.syncfs_min_files) {
    each = own;
  } else {
    std::unordered_map<dev_t, std::vector<File*>> by_filesystem;
    for (File* f : own) by_filesystem[f->id.dev].push_back(f);
    const auto qualifies = [&](const std::vector<File*>& group) {
      return group.size() >= options_.syncfs_min_files;
    };
    // The kernel's dirty data is asked once per round, and only if a filesystem qualifies.
    const bool any = std::any_of(by_filesystem.begin(), by_filesystem.end(),
                                 [&](const auto& entry) { return qualifies(entry.second); });
    const bool may_syncfs = any && little_else_dirty();
    declined = any && !may_syncfs;
    for (auto& [dev, group] : by_filesystem) {
      if (!may_syncfs || !qualifies(group)) {
        each.insert(each.end(), group.begin(), group.end());
        continue;
      }
      // Each fsync waits for the device on its own (on ext4, one journal commit each); one
      // syncfs waits once for all of them (BM_GroupRound8 in BENCHMARKS.md). A syncfs reports a
      // write error of the filesystem once, through whichever file it is called on (and before
      // Linux 5.8 not at all): each file is then asked for its own error through its own
      // descriptor, which reports it once per open file, as an fsync would.
      const int r = fs_.syncfs(group.front()->fd);
      for (File* f : group) {
        const int own = r < 0 ? r : fs_.wait_writeback(f->fd);
        f->error = own < 0 ? -own : 0;
        f->call = "syncfs";
      }
      ++calls;
    }
  }
  // Several files: start all their writes first, so that the fsyncs below overlap on the disk
  // instead of each waiting for its own.
  if (each.size() > 1) {
    for (const File* f : each) fs_.start_writeback(f->fd);
  }
  for (File* f : each) {
    const int r = fs_.fsync(f->fd);
    f->error = r < 0 ? -r : 0;
    ++calls;
  }
  const int64_t took = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
  {
    util::MutexLock lock(mu_);
    ++stats_.rounds;
    stats_.round_requests += round.size();
    round_flush_ns_ += static_cast<uint64_t>(took);
    stats_.flushes += calls;
    if (declined) ++stats_.syncfs_declined;
    for (auto& [id, f] : files) {
      if (f.error != 0) {
        fail_locked(id, f.error, f.call, *f.path);
        f.status = flush_failed(f.error, *f.path, f.call);
      } else {
        // A flush that succeeded after an earlier one of the same file failed vouches for
        // nothing: this round's records may be among what the kernel dropped.
        f.status = failed_flush_locked(id, *f.path);
        if (f.status.ok()) mark_locked(id, f.end);
      }
    }
  }
  for (Submitted& s : round) {
    Status first;
    for (const SyncNeed& need : s.needs) {
      first = files.at(need.id).status;
      if (!first.ok()) break;
    }
    s.done(first);
  }
  return took;
}

}  // namespace kagi::store::detail
