#include <kagi/store/detail/journal.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <map>
#include <string>
#include <utility>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store::detail {

namespace {

constexpr int kMaxSlots = 256;
// The file grows by this much at a time: one inode change per step, not per round.
constexpr uint64_t kGrowStep = 256 * 1024;

Status replay_failed(long r, std::string_view path, std::string_view step) {
  return Status::failed(sys_error(r), "journal replay", path,
                        std::string(step) +
                            " (kagi will not serve a log that may lack acknowledged records: fix "
                            "the cause and start again; docs/STORAGE.md, the journal)");
}

// Writes back what `entries` hold and the logs lack, then fsyncs every log an entry was for:
// those it wrote, and those that held the bytes already (in the page cache, perhaps only
// there: the process that wrote them may have exited a moment ago).
Status restore(FileSystem& fs, const std::vector<JournalEntry>& entries,
               const OpenLogForReplay& open_log, ReplayCounts* counts) {
  struct Log {
    util::UniqueFd fd;
    ino_t ino = 0;
    int64_t birth_ns = 0;
    bool matched = false;  // an entry was for this very file
  };
  std::map<std::string, Log> logs;
  std::string now;
  for (const JournalEntry& e : entries) {
    ++counts->entries;
    auto [it, fresh] = logs.try_emplace(e.path);
    Log& log = it->second;
    if (fresh && open_log(e.path, &log.fd) == 0) {
      struct stat st {};
      if (fs.fstat_birth(log.fd.get(), &st, &log.birth_ns) != 0 || !S_ISREG(st.st_mode)) {
        log.fd.reset();
      }
      log.ino = st.st_ino;
    }
    // Each entry is checked: a log replaced in the middle of the epoch (a compaction) has
    // entries for the old file, then for the new one.
    if (!log.fd || log.ino != e.ino || log.birth_ns != e.birth_ns) {
      ++counts->skipped;
      continue;
    }
    log.matched = true;
    const auto end = static_cast<off_t>(e.offset + e.bytes.size());
    if (long r = read_from(fs, log.fd.get(), static_cast<off_t>(e.offset), now, end); r < 0) {
      return replay_failed(r, e.path, "read");
    }
    if (now == e.bytes) continue;
    if (long r = write_all(fs, log.fd.get(), e.bytes, static_cast<off_t>(e.offset)); r < 0) {
      return replay_failed(r, e.path, "write");
    }
    ++counts->restored;
  }
  for (auto& [path, log] : logs) {
    if (!log.matched) continue;
    if (int r = fs.fsync(log.fd.get()); r < 0) return replay_failed(r, path, "fsync");
  }
  return {};
}

// Replays the journal open at `fd` (held). `*entries`: whether it held any to replay.
Status replay(FileSystem& fs, int fd, const std::string& name, const OpenLogForReplay& open_log,
              ReplayCounts* counts, bool* entries) {
  struct stat st {};
  if (int r = fs.fstat(fd, &st); r < 0) return replay_failed(r, name, "fstat");
  std::string file;
  if (long r = read_from(fs, fd, 0, file, st.st_size); r < 0) {
    return replay_failed(r, name, "read");
  }
  ++counts->journals;
  const std::optional<JournalContents> journal = decode_journal(file);
  *entries = journal && !journal->entries.empty();
  if (!*entries) return {};
  return restore(fs, journal->entries, open_log, counts);
}

// Taking a journal failed at `step`: this process flushes the logs themselves.
void without_journal(long r, const std::string& step) {
  util::log_warn("store: journal: " + step + ": " + sys_error(r).message() +
                 ": group commit flushes the logs themselves in this process");
}

// A fresh epoch: random, so that no entry a journal's earlier life left in the file (where a
// power cut kept parts of a write whose flush never completed) can belong to it.
uint64_t fresh_epoch() {
  uint64_t epoch = 0;
  while (epoch == 0) {
    if (::getrandom(&epoch, sizeof epoch, 0) != static_cast<ssize_t>(sizeof epoch)) {
      epoch = static_cast<uint64_t>(::time(nullptr)) << 20 ^ static_cast<uint64_t>(::getpid());
    }
  }
  return epoch;
}

// Empties the journal at `fd`: a header of a fresh epoch, written and flushed. Older entries
// are never replayed after this. Returns the epoch, or -errno in `*error`.
uint64_t start_epoch(FileSystem& fs, int fd, long* error) {
  const uint64_t epoch = fresh_epoch();
  *error = write_all(fs, fd, encode_journal_header(epoch), 0);
  if (*error == 0) *error = fs.fdatasync(fd);
  return epoch;
}

}  // namespace

Status Journal::open(FileSystem& fs, int root, mode_t file_mode, uint64_t capacity, bool keep,
                     const OpenLogForReplay& open_log, std::unique_ptr<Journal>* kept,
                     ReplayCounts* counts) {
  const std::string folder(kJournalFolder);
  constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int dir = fs.open_at(root, folder.c_str(), kDirFlags, 0);
  if (dir == -ENOENT && keep) {
    const mode_t dir_mode = (file_mode & 0040) ? 0750 : 0700;
    if (int r = fs.mkdir_at(root, folder.c_str(), dir_mode); r < 0 && r != -EEXIST) {
      without_journal(r, "mkdir " + folder);  // a read-only data.dir, say: nothing to replay
      return {};
    }
    if (int r = fs.fsync(root); r < 0) return replay_failed(r, folder, "fsync data.dir");
    dir = fs.open_at(root, folder.c_str(), kDirFlags, 0);
  }
  if (dir == -ENOENT) return {};  // never journaled here: nothing to replay
  if (dir < 0) return replay_failed(dir, folder, "open");
  const util::UniqueFd dir_fd(dir);
  // One opening at a time replays and takes slots: a slot another opening holds while it is
  // still replaying must not pass for a live writer's, nor its logs be served before that.
  if (::flock(dir, LOCK_EX) != 0) return replay_failed(-errno, folder, "flock");
  for (int slot = 0; slot < kMaxSlots; ++slot) {
    const std::string name = folder + "/" + std::to_string(slot);
    const std::string leaf = std::to_string(slot);
    const bool want = keep && !*kept;
    int fd = fs.open_at(dir, leaf.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd == -ENOENT) {
      if (!want) break;  // slots are taken from 0 up: none after a missing one
      fd = fs.open_at(dir, leaf.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, file_mode);
      if (fd < 0) {
        without_journal(fd, "create " + name);
        break;
      }
      if (int r = fs.fsync(dir); r < 0) return replay_failed(r, folder, "fsync");
    } else if (fd == -EACCES || fd == -EPERM || fd == -EROFS) {
      // A reader without write access (kagi-fsck as another user): it cannot replay, and
      // writes nothing either. The next kagi start replays.
      util::log_warn("store: journal " + name + ": " + sys_error(fd).message() +
                     ": not replayed by this process");
      continue;
    }
    if (fd < 0) return replay_failed(fd, name, "open");
    util::UniqueFd file(fd);
    // Held by a live process (or another DataDir of this one): its own to replay when it dies.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) continue;
    bool had_entries = false;
    if (Status s = replay(fs, fd, name, open_log, counts, &had_entries); !s.ok()) return s;
    if (!want && !had_entries) continue;
    // Emptied: what it held is in its logs now, and flushed there. Whatever else the file
    // holds (an older life's entries, a damaged header) belongs to no epoch it will have.
    long error = 0;
    const uint64_t epoch = start_epoch(fs, fd, &error);
    if (error < 0) return replay_failed(error, name, want ? "start" : "reset");
    if (!want) continue;  // the flock goes with the descriptor
    struct stat st {};
    if (int r = fs.fstat(fd, &st); r < 0) return replay_failed(r, name, "fstat");
    kept->reset(
        new Journal(fs, std::move(file), st.st_dev, capacity, epoch,
                    std::max<uint64_t>(static_cast<uint64_t>(st.st_size), kJournalHeaderSize)));
  }
  if (keep && !*kept) {
    util::log_warn(
        "store: no journal slot of data.dir could be taken: group commit flushes the logs "
        "themselves in this process");
  }
  return {};
}

Journal::Journal(FileSystem& fs, util::UniqueFd fd, dev_t dev, uint64_t capacity, uint64_t epoch,
                 uint64_t allocated)
    : fs_(fs),
      fd_(std::move(fd)),
      dev_(dev),
      capacity_(std::max(capacity, kJournalHeaderSize + kJournalEntryHeaderSize + 4096)),
      epoch_(epoch),
      allocated_(allocated) {}

Journal::~Journal() = default;

uint64_t Journal::checkpoints() const { return checkpoints_.load(std::memory_order_relaxed); }

long Journal::allocate(uint64_t end) {
  if (end <= allocated_) return 0;
  const uint64_t target = std::min(capacity_, (end + kGrowStep - 1) / kGrowStep * kGrowStep);
  const std::string zeros(static_cast<size_t>(std::max(target, end) - allocated_), '\0');
  if (long r = write_all(fs_, fd_.get(), zeros, static_cast<off_t>(allocated_)); r < 0) return r;
  allocated_ = std::max(target, end);
  return 0;
}

Status Journal::failed(long r, std::string_view step) {
  broken_ = true;
  return Status::failed(sys_error(r), "journal", kJournalFolder, step);
}

bool Journal::broken() const {
  util::MutexLock lock(mu_);
  return broken_;
}

Status Journal::write(const std::vector<JournalEntry>& entries) {
  util::MutexLock lock(mu_);
  if (broken_) return failed(-EIO, "an earlier write failed");
  buffer_.clear();
  uint64_t at = offset_;
  uint64_t size = 0;
  for (const JournalEntry& e : entries) size += journal_entry_size(e);
  if (at + size > capacity_) {
    // Full: every log of the filesystem made durable by one syncfs, after which no entry
    // written so far is needed, and a new epoch starts at the top.
    if (int r = fs_.syncfs(fd_.get()); r < 0) return failed(r, "syncfs (checkpoint)");
    checkpoints_.fetch_add(1, std::memory_order_relaxed);
    ++epoch_;
    buffer_ = encode_journal_header(epoch_);
    at = 0;
  }
  for (const JournalEntry& e : entries) encode_journal_entry(buffer_, epoch_, e);
  if (long r = allocate(at + buffer_.size()); r < 0) return failed(r, "grow");
  if (long r = write_all(fs_, fd_.get(), buffer_, static_cast<off_t>(at)); r < 0) {
    return failed(r, "write");
  }
  if (int r = fs_.fdatasync(fd_.get()); r < 0) return failed(r, "fdatasync");
  offset_ = at == 0 ? buffer_.size() : at + buffer_.size();
  return {};
}

}  // namespace kagi::store::detail
