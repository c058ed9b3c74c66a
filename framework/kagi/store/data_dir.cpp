#include <kagi/store/data_dir.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include <kagi/store/detail/atomic_commit.hpp>
#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/detail/folder_feed.hpp>
#include <kagi/store/detail/kept_log.hpp>
#include <kagi/store/detail/log_append.hpp>
#include <kagi/store/detail/log_read.hpp>
#include <kagi/store/detail/log_recovery.hpp>
#include <kagi/store/detail/make_dirs.hpp>
#include <kagi/store/detail/temp_cleanup.hpp>
#include <kagi/store/durable_scope.hpp>
#include <kagi/store/path.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store {

namespace {

using detail::check_path;
using detail::make_dirs;
using detail::open_failed;
using detail::sys_error;

std::atomic<uint64_t> g_next_serial{1};

bool on_local_filesystem(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:  // also ext2 and ext3
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
      return true;
    default:
      return false;
  }
}

// The group commit settings of `options`. syncfs only on a local filesystem: elsewhere (FUSE
// before Linux 5.15, network filesystems) it may not reach the server.
detail::GroupSyncOptions group_sync_options(const DataOptions& options, bool local) {
  constexpr uint64_t kMaxKb = UINT64_MAX / 1024;  // a larger limit is no limit
  return {.syncfs_min_files = local ? options.syncfs_min_files : 0,
          .syncfs_max_dirty_bytes =
              options.syncfs_max_dirty_kb > kMaxKb ? 0 : options.syncfs_max_dirty_kb * 1024,
          .max_batch_wait = options.group_max_batch_wait};
}

}  // namespace

StoreStats DataDir::store_stats() const {
  StoreStats stats = sync_.stats();
  stats.replayed = replayed_.restored;
  return stats;
}

std::unique_ptr<DataDir> DataDir::open(const DataOptions& options, std::error_code& ec) {
  return open(options, real_fs(), ec);
}

std::unique_ptr<DataDir> DataDir::open(const DataOptions& options, FileSystem& fs,
                                       std::error_code& ec) {
  ec.clear();
  if (options.dir.empty()) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  ec = make_dirs(options.dir, options.group_readable ? 0750 : 0700);
  if (ec) return nullptr;
  // data.dir itself is opened following symlinks: it is configuration, not request input.
  const int fd = fs.open_at(AT_FDCWD, options.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) {
    ec = sys_error(fd);
    return nullptr;
  }
  std::unique_ptr<DataDir> dir(
      new DataDir(options.dir, util::UniqueFd(fd), options, fs, on_local_filesystem(fd)));
  dir->cleaned_ = detail::remove_dead_temp_files(dir->walk_.root(), options.dir + "/");
  // Before anything reads: what only a journal holds goes back into its logs.
  if (Status st = dir->replay_and_take_journal(options); !st.ok()) {
    ec = st.code();
    return nullptr;
  }
  return dir;
}

DataDir::DataDir(std::string dir, util::UniqueFd root, const DataOptions& options, FileSystem& fs,
                 bool root_is_local)
    : serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)),
      dir_(std::move(dir)),
      fsync_(options.fsync),
      file_mode_(options.group_readable ? 0640 : 0600),
      dir_mode_(options.group_readable ? 0750 : 0700),
      fs_(fs),
      walk_(fs, std::move(root), dir_mode_, fsync_),
      local_attributes_(root_is_local),
      damage_(dir_),
      sync_(fs, group_sync_options(options, root_is_local)) {}

DataDir::~DataDir() = default;

Status DataDir::replay_and_take_journal(const DataOptions& options) {
  const auto open_log = [this](std::string_view path, util::UniqueFd* log) {
    if (!check_path("replay", path).ok()) return -EINVAL;
    std::string step;
    return walk_.open_existing(path, O_RDWR, log, &step);
  };
  const bool keep = options.fsync && options.journal && local_attributes_;
  std::unique_ptr<detail::Journal> journal;
  if (Status s = detail::Journal::open(fs_, walk_.root(), file_mode_, options.journal_kb * 1024,
                                       keep, open_log, &journal, &replayed_);
      !s.ok()) {
    util::log_error("store: " + s.message());
    return s;
  }
  if (replayed_.restored > 0) {
    util::log_warn("store: " + dir_ + ": wrote back " + std::to_string(replayed_.restored) +
                   " journal entries that logs had lost (a power cut or a crash of the machine)");
  }
  if (journal) sync_.use_journal(std::move(journal));
  return {};
}

Status DataDir::check_access(std::string_view op, std::string_view path,
                             const lock::Guard& guard) const {
  if (Status s = check_path(op, path); !s.ok()) return s;
  if (Status s = detail::check_held(op, path, guard); !s.ok()) return s;
  bindings_.note(op, path, guard.name());
  return {};
}

Result<std::string> DataDir::read(const lock::Guard& guard, std::string_view path) const {
  if (Status s = check_access("read", path, guard); !s.ok()) return s;
  util::UniqueFd fd;
  std::string step;
  if (int r = walk_.open_readonly(path, &fd, &step); r < 0) {
    if (r == -ENOENT) return std::string();
    return open_failed(r, "read", path, step);
  }
  std::string bytes;
  if (long r = detail::read_from(fs_, fd.get(), 0, bytes); r < 0) {
    return Status::failed(sys_error(r), "read", path, "read");
  }
  return bytes;
}

Result<bool> DataDir::exists(const lock::Guard& guard, std::string_view path) const {
  if (Status s = check_access("exists", path, guard); !s.ok()) return s;
  const auto segments = path_segments(path);
  detail::DirFd parent;
  std::string step;
  if (int r = walk_.open_parent(segments, false, &parent, &step); r < 0) {
    if (r == -ENOENT) return false;
    return open_failed(r, "exists", path, step);
  }
  const std::string leaf(segments.back());
  const int fd = fs_.open_at(parent.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd == -ENOENT) return false;
  if (fd < 0) return open_failed(fd, "exists", path, "open");
  util::UniqueFd opened(fd);  // only its existence was asked
  return true;
}

Status DataDir::commit(const lock::ExclusiveGuard& guard, std::string_view path,
                       std::string_view bytes) {
  if (Status s = check_access("commit", path, guard); !s.ok()) return s;
  const auto segments = path_segments(path);
  detail::DirFd parent;
  std::string step;
  if (int r = walk_.open_parent(segments, true, &parent, &step); r < 0) {
    return open_failed(r, "commit", path, step);
  }
  detail::drop_kept_log(serial_, path);  // the path is about to name another file
  return detail::atomic_commit({fs_, file_mode_, fsync_}, parent.get(), segments.back(), bytes,
                               guard, path);
}

Status DataDir::remove(const lock::ExclusiveGuard& guard, std::string_view path) {
  if (Status s = check_access("remove", path, guard); !s.ok()) return s;
  const auto segments = path_segments(path);
  detail::DirFd parent;
  std::string step;
  if (int r = walk_.open_parent(segments, false, &parent, &step); r < 0) {
    if (r == -ENOENT) return {};
    return open_failed(r, "remove", path, step);
  }
  // Whatever happens below, what this process verified of a log there no longer applies.
  log_ends_.forget(path);
  detail::drop_kept_log(serial_, path);
  if (std::error_code ec = guard.verify()) {
    return Status::failed(ec, "remove", path, "fence (lock '" + guard.name() + "')");
  }
  const std::string leaf(segments.back());
  const int r = fs_.unlink_at(parent.get(), leaf.c_str());
  if (r == -ENOENT) return {};
  if (r < 0) return Status::failed(sys_error(r), "remove", path, "unlink");
  if (fsync_) {
    if (int f = fs_.fsync(parent.get()); f < 0) {
      return Status::failed(sys_error(f), "remove", path, "fsync directory");
    }
  }
  return {};
}

Status DataDir::append(const lock::ExclusiveGuard& guard, std::string_view path,
                       std::string_view record) {
  if (Status s = check_access("append", path, guard); !s.ok()) return s;
  const detail::AppendContext ctx{fs_,    walk_, log_ends_, damage_,          file_mode_,
                                  fsync_, sync_, serial_,   local_attributes_};
  return detail::append_record(ctx, guard, path, record);
}

Status DataDir::rewrite_log(const lock::ExclusiveGuard& guard, std::string_view path,
                            const std::vector<std::string>& records) {
  std::string bytes(detail::kLogMagic);
  for (const auto& record : records) {
    if (record.size() > detail::kMaxRecord) {
      return Status::failed(Errc::kTooLarge, "rewrite_log", path,
                            std::to_string(record.size()) + " bytes (limit 16 MiB)");
    }
    detail::encode_record(bytes, record);
  }
  Status result = commit(guard, path, bytes);
  // The file was replaced: what this process verified of the old one no longer applies.
  log_ends_.forget(path);
  return result;
}

Result<std::vector<std::string>> DataDir::read_log(const lock::Guard& guard, std::string_view path,
                                                   size_t last_n) const {
  if (Status s = check_access("read_log", path, guard); !s.ok()) return s;
  util::UniqueFd fd;
  std::string step;
  if (int r = walk_.open_readonly(path, &fd, &step); r < 0) {
    if (r == -ENOENT) return std::vector<std::string>();
    return open_failed(r, "read_log", path, step);
  }
  detail::ReadExtent seen;
  auto records = detail::read_records(fs_, fd.get(), path, last_n, damage_, &seen);
  if (!records.ok()) return records;
  if (Status s = require_durable(path, fd, seen); !s.ok()) return s;
  return records;
}

Result<LogTail> DataDir::read_log_since(const lock::Guard& guard, std::string_view path,
                                        LogCursor& cursor) const {
  if (Status s = check_access("read_log", path, guard); !s.ok()) return s;
  if (local_attributes_ && cursor.end != 0 && guard.mode() == lock::Mode::kShared) {
    // A reader's usual read of a log nobody wrote since: one statx, no open. (A writer is about
    // to append, and its own last append moved the log past its cursor: it would only pay the
    // statx on top.) The path is not resolved safely here, so only a file equal to the one the
    // cursor read (opened safely) counts.
    struct stat st {};
    int64_t birth_ns = 0;
    const std::string name(path);
    if (fs_.stat_birth_at(walk_.root(), name.c_str(), &st, &birth_ns) == 0 &&
        detail::log_unchanged_since(st, birth_ns, cursor) &&
        (!fsync_ || sync_.durable(detail::FileId{st.st_dev, st.st_ino, birth_ns}, cursor.end))) {
      return LogTail{};
    }
  }
  util::UniqueFd fd;
  detail::FileStatus now;
  bool held_since = false;
  bool keep = reuse_kept_log(path, guard, cursor, &fd, &now, &held_since);
  const bool reused = keep;
  std::string step;
  if (!reused) {
    if (int r = open_log_to_read(path, guard, &fd, &keep, &step); r < 0) {
      if (r != -ENOENT) return open_failed(r, "read_log", path, step);
      // The log vanished: the caller starts over with nothing.
      cursor = LogCursor{};
      LogTail tail;
      tail.restarted = true;
      return tail;
    }
  }
  detail::ReadExtent seen;
  const LogCursor before = cursor;
  auto tail = detail::read_records_since(fs_, fd.get(), path, cursor, damage_, &seen,
                                         reused ? &now : nullptr, held_since);
  if (!tail.ok()) return tail;
  if (Status s = require_durable(path, fd, seen, keep); !s.ok()) {
    cursor = before;
    return s;
  }
  if (keep) {
    detail::keep_log(serial_, path, guard,
                     detail::KeptLog{std::move(fd), cursor, detail::access_of(seen.st)});
  }
  return tail;
}

bool DataDir::reuse_kept_log(std::string_view path, const lock::Guard& guard,
                             const LogCursor& cursor, util::UniqueFd* fd, detail::FileStatus* now,
                             bool* held_since) const {
  if (!local_attributes_ || !detail::keepable(guard)) return false;
  bool same_grant = false;
  std::optional<detail::KeptLog> kept = detail::take_kept_log(serial_, path, guard, &same_grant);
  if (!kept) return false;
  const std::string name(path);
  // Without times (fs.hpp): the append that follows would pay for them. Identity and access
  // are what decide here, and the read checks the last record's header.
  if (fs_.stat_birth_at(walk_.root(), name.c_str(), &now->st, &now->birth_ns,
                        FileSystem::Times::kSkip) != 0) {
    return false;
  }
  // The kept descriptor pins its inode, so no other file can have its number meanwhile.
  const LogCursor& c = kept->cursor;
  if (!S_ISREG(now->st.st_mode) || now->st.st_dev != c.dev || now->st.st_ino != c.ino ||
      now->birth_ns != c.birth_ns) {
    return false;  // another file (or none) is at the path now: `kept` closes here
  }
  // A chmod or chown since it was opened: the descriptor would still write, so the path is
  // opened again (and read read-only if it now refuses writes).
  if (detail::access_of(now->st) != kept->access) return false;
  *fd = std::move(kept->fd);
  *held_since = same_grant && detail::same_place(kept->cursor, cursor);
  return true;
}

int DataDir::open_log_to_read(std::string_view path, const lock::Guard& guard, util::UniqueFd* fd,
                              bool* keep, std::string* step) const {
  *keep = detail::keepable(guard);
  if (*keep) {
    const int r = walk_.open_existing(path, O_RDWR, fd, step);
    if (r == 0 || r == -ENOENT) {
      // The descriptor may be kept for many reads: they need not dirty the inode's access time
      // (a hint: refused for a file this process does not own).
      if (r == 0) detail::add_no_atime(fd->get());
      return r;
    }
    *keep = false;  // e.g. a log made read-only by hand: reading it is still allowed
  }
  return walk_.open_readonly(path, fd, step);
}

Status DataDir::require_durable(std::string_view path, util::UniqueFd& fd,
                                const detail::ReadExtent& seen, bool keep) const {
  if (!fsync_ || sync_.durable(seen.id, seen.size)) return {};
  util::UniqueFd flush_fd;
  if (!keep) {
    flush_fd = std::move(fd);
  } else if (int r = fs_.dup(fd.get()); r >= 0) {
    flush_fd.reset(r);
  } else {
    return Status::failed(sys_error(r), "read_log", path, "dup");
  }
  detail::SyncNeed need{seen.id, seen.size, std::move(flush_fd), std::string(path)};
  if (DurableScope* scope = DurableScope::current()) {
    scope->add(sync_, std::move(need));
    return {};
  }
  // Outside a request: a scope of its own, waited for now.
  DurableScope scope;
  scope.add(sync_, std::move(need));
  return scope.wait();
}

std::unique_ptr<ChangeFeed> DataDir::watch(std::string_view folder, std::error_code& ec) const {
  const std::optional<std::string> prefix = folder_prefix(folder);
  if (!prefix) {
    ec = make_error_code(Errc::kUnsafePath);
    return nullptr;
  }
  return detail::watch_folder(dir_ + "/" + *prefix, *prefix, dir_mode_, ec);
}

}  // namespace kagi::store
