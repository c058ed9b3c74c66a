#include <kagi/store/detail/journal.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
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

// Writes back what `entries` hold and the logs lack; fsyncs every log written.
Status restore(FileSystem& fs, const std::vector<JournalEntry>& entries,
               const OpenLogForReplay& open_log, ReplayCounts* counts) {
  struct Log {
    util::UniqueFd fd;
    bool same = false;  // still the file the entries were written for
    bool written = false;
  };
  std::map<std::string, Log> logs;
  std::string now;
  for (const JournalEntry& e : entries) {
    ++counts->entries;
    auto [it, fresh] = logs.try_emplace(e.path);
    Log& log = it->second;
    if (fresh) {
      if (open_log(e.path, &log.fd) == 0) {
        struct stat st {};
        int64_t birth = 0;
        log.same = fs.fstat_birth(log.fd.get(), &st, &birth) == 0 && st.st_ino == e.ino &&
                   birth == e.birth_ns && S_ISREG(st.st_mode);
      }
    }
    if (!log.same) {
      ++counts->skipped;
      continue;
    }
    if (long r = read_from(fs, log.fd.get(), static_cast<off_t>(e.offset), now,
                           static_cast<off_t>(e.offset + e.bytes.size()));
        r < 0) {
      return replay_failed(r, e.path, "read");
    }
    if (now == e.bytes) continue;
    if (long r = write_all(fs, log.fd.get(), e.bytes, static_cast<off_t>(e.offset)); r < 0) {
      return replay_failed(r, e.path, "write");
    }
    log.written = true;
    ++counts->restored;
  }
  for (auto& [path, log] : logs) {
    if (!log.written) continue;
    if (int r = fs.fsync(log.fd.get()); r < 0) return replay_failed(r, path, "fsync");
  }
  return {};
}

// Replays the journal open at `fd` (held): returns its epoch in `*epoch` (0 for a new file).
Status replay(FileSystem& fs, int fd, const OpenLogForReplay& open_log, ReplayCounts* counts,
              uint64_t* epoch, uint64_t* size) {
  struct stat st {};
  if (int r = fs.fstat(fd, &st); r < 0) return replay_failed(r, kJournalFolder, "fstat");
  *size = static_cast<uint64_t>(st.st_size);
  std::string file;
  if (long r = read_from(fs, fd, 0, file, st.st_size); r < 0) {
    return replay_failed(r, kJournalFolder, "read");
  }
  ++counts->journals;
  const std::optional<JournalContents> journal = decode_journal(file);
  if (!journal) {
    *epoch = 0;
    return {};
  }
  *epoch = journal->epoch;
  return restore(fs, journal->entries, open_log, counts);
}

// Taking a journal failed at `step`: this process flushes the logs themselves.
void without_journal(long r, const std::string& step) {
  util::log_warn("store: journal: " + step + ": " + sys_error(r).message() +
                 ": group commit flushes the logs themselves in this process");
}

// The header of a new epoch, written and flushed: from now on, older entries are not replayed.
long start_epoch(FileSystem& fs, int fd, uint64_t epoch) {
  if (long r = write_all(fs, fd, encode_journal_header(epoch), 0); r < 0) return r;
  return fs.fdatasync(fd);
}

}  // namespace

Status Journal::open(FileSystem& fs, int root, mode_t file_mode, uint64_t capacity, bool keep,
                     const OpenLogForReplay& open_log, std::unique_ptr<Journal>* kept,
                     ReplayCounts* counts) {
  const std::string folder(kJournalFolder);
  int dir = fs.open_at(root, folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (dir == -ENOENT && keep) {
    const mode_t dir_mode = (file_mode & 0040) ? 0750 : 0700;
    if (int r = fs.mkdir_at(root, folder.c_str(), dir_mode); r < 0 && r != -EEXIST) {
      without_journal(r, "mkdir " + folder);  // a read-only data.dir, say: nothing to replay
      return {};
    }
    if (int r = fs.fsync(root); r < 0) return replay_failed(r, folder, "fsync data.dir");
    dir = fs.open_at(root, folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  }
  if (dir == -ENOENT) return {};  // never journaled here: nothing to replay
  if (dir < 0) return replay_failed(dir, folder, "open");
  const util::UniqueFd dir_fd(dir);
  for (int slot = 0; slot < kMaxSlots; ++slot) {
    const std::string name = std::to_string(slot);
    const bool want = keep && !*kept;
    int fd = fs.open_at(dir, name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    bool created = false;
    if (fd == -ENOENT) {
      if (!want) break;  // slots are taken from 0 up: none after a missing one
      fd = fs.open_at(dir, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, file_mode);
      if (fd < 0) {
        without_journal(fd, "create " + folder + "/" + name);
        break;
      }
      created = true;
    }
    if (fd < 0) return replay_failed(fd, folder + "/" + name, "open");
    util::UniqueFd file(fd);
    // Held by a live process (or another DataDir of this one): its own to replay when it dies.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) continue;
    if (created) {
      if (int r = fs.fsync(fd); r < 0) return replay_failed(r, folder + "/" + name, "fsync");
      if (int r = fs.fsync(dir); r < 0) return replay_failed(r, folder, "fsync");
    }
    uint64_t epoch = 0, size = 0;
    const uint64_t entries_before = counts->entries;
    if (Status s = replay(fs, fd, open_log, counts, &epoch, &size); !s.ok()) return s;
    if (!want) {
      // Replayed: its entries are in their logs, and flushed there. Emptied so that the next
      // opening need not read it again.
      if (counts->entries > entries_before) {
        if (long r = start_epoch(fs, fd, epoch + 1); r < 0) {
          return replay_failed(r, folder + "/" + name, "reset");
        }
      }
      continue;  // the flock goes with the descriptor
    }
    if (long r = start_epoch(fs, fd, epoch + 1); r < 0) {
      return replay_failed(r, folder + "/" + name, "start");
    }
    struct stat st {};
    if (int r = fs.fstat(fd, &st); r < 0) return replay_failed(r, folder + "/" + name, "fstat");
    kept->reset(new Journal(fs, std::move(file), st.st_dev, capacity, epoch + 1,
                            std::max<uint64_t>(size, kHeaderSize)));
  }
  if (keep && !*kept) {
    util::log_warn(
        "store: every journal slot of data.dir is held: group commit flushes the logs "
        "themselves in this process");
  }
  return {};
}

Journal::Journal(FileSystem& fs, util::UniqueFd fd, dev_t dev, uint64_t capacity, uint64_t epoch,
                 uint64_t allocated)
    : fs_(fs),
      fd_(std::move(fd)),
      dev_(dev),
      capacity_(std::max(capacity, kHeaderSize + kEntryHeaderSize + 4096)),
      epoch_(epoch),
      allocated_(allocated) {}

Journal::~Journal() = default;

uint64_t Journal::checkpoints() const {
  util::MutexLock lock(mu_);
  return checkpoints_;
}

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

Status Journal::write(const std::vector<JournalEntry>& entries) {
  util::MutexLock lock(mu_);
  if (broken_) return failed(-EIO, "an earlier write failed");
  buffer_.clear();
  uint64_t at = offset_;
  uint64_t size = 0;
  for (const JournalEntry& e : entries) size += size_of(e);
  if (at + size > capacity_) {
    // Full: every log of the filesystem made durable by one syncfs, after which no entry
    // written so far is needed, and a new epoch starts at the top.
    if (int r = fs_.syncfs(fd_.get()); r < 0) return failed(r, "syncfs (checkpoint)");
    ++checkpoints_;
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
