// store/detail/journal.hpp — the redo journal that group commit flushes instead of the logs.
//
// With data.fsync = "always", a round of group commit used to flush every log it touched: one
// fsync per log, or one syncfs of the filesystem for many (on ext4, a journal commit that
// writes every changed block and inode). A round now copies the bytes each log gained since
// this process last knew it durable into one entry per log, writes the entries to its own
// journal file at once, and flushes that one file: one write and one fdatasync, whatever the
// number of logs. The logs themselves are left to the kernel's writeback.
//
// After a power cut a log may lack what only the journal holds, so a DataDir replays every
// journal when it opens, before anything reads: each entry's bytes are written back where they
// belong if the log does not hold them already, the logs written are fsynced, and only then is
// the journal emptied. An entry names its log by path and by inode and birth time: a log that
// was replaced since (compaction writes a new file, fsynced before it is renamed into place) is
// left alone.
//
// Layout: data.dir/.kagi-journal/<n>, one file per process, held with flock for the process's
// life. Opening takes the first slot nobody holds; a slot nobody holds was left by a process
// that died, and is replayed (writing back only what differs, so replaying a journal whose
// writer was merely killed changes nothing). The file is written from its start, grown in
// zeroed steps to data.journal_kb and then overwritten in place (so that an fdatasync writes
// data only, no inode). When the next round would not fit, a syncfs makes every log of the
// filesystem durable, the header's epoch goes up, and writing starts over: entries of an older
// epoch are never replayed.
//
// The format is in store/detail/journal_format.hpp. Replay stops at the first entry that is torn,
// of another epoch or fails its checksum: what a power cut mid-write leaves, and nothing that was
// ever acknowledged (an acknowledgement waits for the fdatasync that covers its entry and every
// entry before it).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/store/detail/journal_format.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/store/status.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

inline constexpr std::string_view kJournalFolder = ".kagi-journal";

// What replaying the journals found.
struct ReplayCounts {
  uint64_t journals = 0;  // slots nobody held, read
  uint64_t entries = 0;   // entries of their current epochs
  uint64_t restored = 0;  // entries whose bytes the log lacked, written back
  uint64_t skipped = 0;   // entries whose log is gone or was replaced
};

// Opens a log for replay: read-write, below data.dir, no symlinks. 0 with `*fd` set, or -errno.
using OpenLogForReplay = std::function<int(std::string_view path, util::UniqueFd* fd)>;

class Journal {
 public:
  // Replays every journal of data.dir (`root`) that no process holds. With `keep`, then takes
  // a slot for this process (creating the folder and file, `file_mode`) and returns it; else
  // returns null. `*counts` says what replay did. Fails (nothing kept) if a log could not be
  // written back or flushed: serving before that would show a log without acknowledged records.
  static Status open(FileSystem& fs, int root, mode_t file_mode, uint64_t capacity, bool keep,
                     const OpenLogForReplay& open_log, std::unique_ptr<Journal>* kept,
                     ReplayCounts* counts);

  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // The filesystem of the journal: only logs on it may be journaled (a syncfs of it is what
  // lets old entries go).
  dev_t dev() const { return dev_; }
  // The most entry bytes one write() takes (paths and headers included); a round with more
  // flushes the rest of its logs itself.
  uint64_t room() const { return capacity_ - kJournalHeaderSize; }

  // Writes `entries` (together at most room()) and makes them durable: one write, one
  // fdatasync, after a syncfs when the journal is full. After a failure the journal refuses
  // every later write (the caller flushes the logs themselves from then on).
  Status write(const std::vector<JournalEntry>& entries) KAGI_EXCLUDES(mu_);

  // A write failed: the journal takes no more.
  bool broken() const KAGI_EXCLUDES(mu_);
  // syncfs calls made to start the journal over. Without the journal's lock: a round holds it
  // across its flush, and the admin page's counters must not wait for a checkpoint's syncfs.
  uint64_t checkpoints() const;

 private:
  Journal(FileSystem& fs, util::UniqueFd fd, dev_t dev, uint64_t capacity, uint64_t epoch,
          uint64_t allocated);
  // Marks the journal broken; the error of `step` (-errno `r`).
  Status failed(long r, std::string_view step) KAGI_REQUIRES(mu_);
  // Grows the file with zeros to cover `end` (in steps, at most to the capacity).
  long allocate(uint64_t end) KAGI_REQUIRES(mu_);

  FileSystem& fs_;
  const util::UniqueFd fd_;
  const dev_t dev_;
  const uint64_t capacity_;
  mutable util::Mutex mu_;
  uint64_t epoch_ KAGI_GUARDED_BY(mu_);
  uint64_t offset_ KAGI_GUARDED_BY(mu_) = kJournalHeaderSize;  // where the next entry goes
  uint64_t allocated_ KAGI_GUARDED_BY(mu_);                    // the file's size
  std::atomic<uint64_t> checkpoints_{0};
  bool broken_ KAGI_GUARDED_BY(mu_) = false;
  std::string buffer_ KAGI_GUARDED_BY(mu_);  // the encoded round, reused
};

}  // namespace kagi::store::detail
