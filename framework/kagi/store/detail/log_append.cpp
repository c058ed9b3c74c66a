#include <kagi/store/detail/log_append.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <optional>
#include <string>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/detail/kept_log.hpp>
#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/durable_scope.hpp>
#include <kagi/store/path.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

namespace {

constexpr int kLogFlags = O_RDWR | O_NOFOLLOW | O_CLOEXEC;

// The log as the append opened it.
struct OpenLog {
  util::UniqueFd fd;
  DirFd parent;            // held when the walk opened the log: a new entry is fsynced there
  bool created = false;    // this append created the file
  bool from_read = false;  // the writer's read kept it: `st`, `birth_ns` and `known` are set
  struct stat st {};
  int64_t birth_ns = 0;
  LogCursor known;  // where whole records were last seen to end: a hint (find_end)
};

// Step 1, the usual case of a post: the log the writer's read under this same grant kept open,
// if it is still the file the path names (a replaced log is unlinked: the path is opened then).
bool adopt_kept_log(const AppendContext& ctx, const lock::Guard& guard, std::string_view path,
                    OpenLog* log) {
  bool same_grant = false;
  std::optional<KeptLog> kept = take_kept_log(ctx.store, path, guard, &same_grant);
  // Kept under another grant: the lock was free in between; `kept` closes here.
  if (!kept || !same_grant) return false;
  // Without times: asking them would make this append dirty the inode (fs.hpp). The read's
  // cursor is trusted by identity and size (find_end: held since, under this grant).
  if (ctx.fs.fstat_birth(kept->fd.get(), &log->st, &log->birth_ns, FileSystem::Times::kSkip) < 0 ||
      log->st.st_nlink == 0) {
    return false;
  }
  log->fd = std::move(kept->fd);
  log->known = kept->cursor;
  log->from_read = true;
  return true;
}

// Step 1 otherwise. An existing log in one open; the walk creates what is missing and
// keeps the directory to make the new entry durable.
Status open_log(const AppendContext& ctx, std::string_view path, OpenLog* log) {
  if (ctx.walk.open_direct(path, kLogFlags, &log->fd) == 0) return {};
  const auto segments = path_segments(path);
  std::string step;
  if (int r = ctx.walk.open_parent(segments, true, &log->parent, &step); r < 0) {
    return open_failed(r, "append", path, step);
  }
  const std::string leaf(segments.back());
  int fd = ctx.fs.open_at(log->parent.get(), leaf.c_str(), kLogFlags, 0);
  if (fd == -ENOENT) {
    fd = ctx.fs.open_at(log->parent.get(), leaf.c_str(), kLogFlags | O_CREAT | O_EXCL,
                        ctx.file_mode);
    log->created = fd >= 0;
  }
  if (fd < 0) return open_failed(fd, "append", path, "open");
  log->fd.reset(fd);
  return {};
}

// Step 2. Where whole records end, starting from what this process verified before; damage
// followed by intact records stays where it is (kagi-fsck can show and repair it) and is
// reported.
Status find_end(const AppendContext& ctx, const std::string& path, OpenLog& log, LogEnd* end) {
  if (!log.from_read) {
    if (int r = ctx.fs.fstat_birth(log.fd.get(), &log.st, &log.birth_ns); r < 0) {
      return Status::failed(sys_error(r), "append", path, "fstat");
    }
    log.known = ctx.ends.find(path);
  }
  // A kept log comes from the read under this same grant: the lock was held since its cursor.
  if (Status s = find_log_end(ctx.fs, log.fd.get(), log.st, log.birth_ns, log.known, path, end,
                              log.from_read);
      !s.ok()) {
    return s;
  }
  if (!end->damage.empty())
    ctx.damage.report("append", path, log.st, end->parsed_from, end->damage);
  return {};
}

// Step 3. The last check before anything changes on disk: a stale holder must not even trim
// the tail, which might be the current holder's record in progress.
Status fence(const lock::Guard& guard, std::string_view path) {
  if (std::error_code ec = guard.verify()) {
    return Status::failed(ec, "append", path, "fence (lock '" + guard.name() + "')");
  }
  return {};
}

// Step 4. Cuts the bytes past the last whole record: what a writer that died mid-append left.
// Only a tail no intact record follows gets here (find_log_end ends at the last one).
Status cut_torn_tail(const AppendContext& ctx, std::string_view path, const OpenLog& log,
                     uint64_t valid_end) {
  const auto size = static_cast<uint64_t>(log.st.st_size);
  if (valid_end >= size) return {};
  if (int r = ctx.fs.ftruncate(log.fd.get(), static_cast<off_t>(valid_end)); r < 0) {
    return Status::failed(sys_error(r), "append", path, "truncate torn tail");
  }
  util::log_warn("store: append " + std::string(path) + ": dropped a torn tail of " +
                 std::to_string(size - valid_end) +
                 " bytes (a writer died mid-append; its record was never acknowledged)");
  return {};
}

// The bytes step 5 writes: the record's frame, after the magic if the log has none yet.
std::string frame_for(std::string_view record, bool new_log) {
  std::string frame;
  frame.reserve(kLogMagic.size() + kRecordHeader + record.size());
  if (new_log) frame.append(kLogMagic);
  encode_record(frame, record);
  return frame;
}

// Step 5. Writes `frame` at `at` and, unless `defer`, makes it durable. A failed write or fsync
// is undone, so that an unacknowledged record never shows up later.
Status write_frame(const AppendContext& ctx, std::string_view path, const OpenLog& log, uint64_t at,
                   std::string_view frame, bool defer) {
  const int fd = log.fd.get();
  auto undo = [&](long r, std::string_view step) {
    ctx.fs.ftruncate(fd, static_cast<off_t>(at));
    return Status::failed(sys_error(r), "append", path, step);
  };
  if (long r = write_all(ctx.fs, fd, frame, static_cast<off_t>(at)); r < 0) {
    return undo(r, "write");
  }
  if (ctx.fsync && !defer) {
    if (int r = ctx.fs.fsync(fd); r < 0) {
      // Other requests' records may wait for a group flush of this log: after this error no
      // flush of it can vouch for them (store/detail/group_sync.hpp).
      ctx.group.fail(FileId{log.st.st_dev, log.st.st_ino, log.birth_ns}, -r, path);
      return undo(r, "fsync");
    }
    if (log.created) {
      if (int r = ctx.fs.fsync(log.parent.get()); r < 0) return undo(r, "fsync directory");
    }
  }
  return {};
}

// Step 6. The cursor past the record just written, for the next append's find_end (and the
// kept descriptor's: it names the file).
LogCursor cursor_past(const OpenLog& log, uint64_t at, std::string_view frame, size_t payload) {
  const size_t record_at = frame.size() - kRecordHeader - payload;
  return LogCursor{.dev = log.st.st_dev,
                   .ino = log.st.st_ino,
                   .birth_ns = log.birth_ns,
                   .end = at + frame.size(),
                   .last_start = at + record_at,
                   .last_header = load_u64(frame.data() + record_at)};
}

// Steps 2 to 6 on the open log.
Status append_to(const AppendContext& ctx, const lock::Guard& guard, const std::string& path,
                 std::string_view record, OpenLog& log) {
  LogEnd end;
  if (Status s = find_end(ctx, path, log, &end); !s.ok()) return s;
  const FileId id{log.st.st_dev, log.st.st_ino, log.birth_ns};
  // A log whose flush failed takes no more records: none could be made durable.
  if (ctx.fsync) {
    if (Status s = ctx.group.failed_flush(id, path); !s.ok()) return s;
  }
  if (Status s = fence(guard, path); !s.ok()) return s;
  if (Status s = cut_torn_tail(ctx, path, log, end.valid_end); !s.ok()) return s;
  const std::string frame = frame_for(record, end.valid_end == 0);
  DurableScope* scope = ctx.fsync && !log.created ? DurableScope::current() : nullptr;
  if (Status s = write_frame(ctx, path, log, end.valid_end, frame, scope != nullptr); !s.ok()) {
    return s;
  }
  log.known = cursor_past(log, end.valid_end, frame, record.size());
  ctx.ends.remember(path, log.known);
  if (!ctx.fsync) return {};
  // Step 7. Durable now (flushed above), or once the scope's request has released its lock.
  const uint64_t new_end = end.valid_end + frame.size();
  if (scope == nullptr) {
    ctx.group.mark(id, new_end);
  } else {
    // The flush takes a second descriptor when this one is to be kept (store/detail/kept_log.hpp).
    util::UniqueFd flush_fd;
    if (const int dup = keepable(guard) ? ctx.fs.dup(log.fd.get()) : -1; dup >= 0) {
      flush_fd.reset(dup);
    } else {
      flush_fd = std::move(log.fd);
    }
    scope->add(ctx.group, SyncNeed{id, new_end, std::move(flush_fd), path});
  }
  return {};
}

}  // namespace

Status append_record(const AppendContext& ctx, const lock::Guard& guard, std::string_view path,
                     std::string_view record) {
  if (record.size() > kMaxRecord) {
    return Status::failed(Errc::kTooLarge, "append", path,
                          std::to_string(record.size()) + " bytes (limit 16 MiB)");
  }
  OpenLog log;
  if (!adopt_kept_log(ctx, guard, path, &log)) {
    if (Status s = open_log(ctx, path, &log); !s.ok()) return s;
    // Kept for later reads, which need not dirty the inode's access time (a hint: refused
    // for a file this process does not own).
    if (ctx.keep_open) add_no_atime(log.fd.get());
  }
  const std::string key(path);  // LogEnds' key, made once
  Status s = append_to(ctx, guard, key, record, log);
  // What this process knew of the log is in doubt after a failure halfway.
  if (!s.ok()) {
    ctx.ends.forget(path);
  } else if (ctx.keep_open && log.fd && keepable(guard)) {
    keep_log(ctx.store, path, guard, KeptLog{std::move(log.fd), log.known, access_of(log.st)});
  }
  return s;
}

}  // namespace kagi::store::detail
