#include <kagi/store/data_dir.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include <kagi/store/damage.hpp>
#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/path.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/process.hpp>

namespace kagi::store {

namespace {

constexpr std::string_view kTempPrefix = ".kagi-tmp-";
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
// Directories deeper than this are not searched for leftover temp files.
constexpr int kMaxCleanDepth = 32;
constexpr size_t kMaxBindings = 4096;

// Process-wide, so two DataDirs on one directory (tests, or an app opening it twice) never
// pick the same temp name.
std::atomic<uint64_t> temp_counter{0};

std::error_code sys(long negative_errno) {
  return {static_cast<int>(-negative_errno), std::system_category()};
}

// A refused symlink is a path problem, not an I/O error: say so.
Status open_failed(long r, std::string_view op, std::string_view path, std::string_view step) {
  if (r == -ELOOP) {
    return Status::failed(Errc::kUnsafePath, op, path,
                          std::string(step) + ": symlink (not followed below data.dir)");
  }
  return Status::failed(sys(r), op, path, step);
}

Status check_path(std::string_view op, std::string_view path) {
  if (const char* problem = path_problem(path)) {
    return Status::failed(Errc::kUnsafePath, op, path, problem);
  }
  return {};
}

// Writes all of `data` at the fd's offset (pwrite at `offset` if offset >= 0). Returns 0 or
// -errno.
long write_all(FileSystem& fs, int fd, std::string_view data, off_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = offset < 0 ? fs.write(fd, data.data() + done, data.size() - done)
                           : fs.pwrite(fd, data.data() + done, data.size() - done,
                                       offset + static_cast<off_t>(done));
    if (n == -EINTR) continue;
    if (n < 0) return n;
    if (n == 0) return -EIO;  // no progress on a regular file: treat as an I/O error
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Reads [offset, EOF) of `fd` into `out`. Returns 0 or -errno.
// Reads from `offset` to the end into `out`. `size`: the file's size if the caller has just
// stat'ed it (else it is asked for). Reading stops there: every caller holds the file's lock,
// so nothing grows it meanwhile (and a commit replaces files, it never extends an open one).
long read_from(FileSystem& fs, int fd, off_t offset, std::string& out,
               std::optional<off_t> size = std::nullopt) {
  if (!size) {
    struct stat st {};
    if (int r = fs.fstat(fd, &st); r < 0) return r;
    size = st.st_size;
  }
  out.assign(*size > offset ? static_cast<size_t>(*size - offset) : 0, '\0');
  size_t have = 0;
  while (have < out.size()) {
    ssize_t n =
        fs.pread(fd, out.data() + have, out.size() - have, offset + static_cast<off_t>(have));
    if (n == -EINTR) continue;
    if (n < 0) return n;
    if (n == 0) break;  // shorter than stat said: keep what is there
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return 0;
}

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Does `c` still describe the start of the open log `fd` (stat'ed as `st`)? The same file,
// no shorter than the cursor's end, and the cursor's last record still in place (its header
// read again: a replaced log that reuses the inode number fails here). 1 yes, 0 no, <0 -errno.
int log_cursor_holds(FileSystem& fs, int fd, const struct stat& st, int64_t birth_ns,
                     const LogCursor& c) {
  if (c.end == 0 || c.dev != st.st_dev || c.ino != st.st_ino) return 0;
  if (c.birth_ns != 0 && birth_ns != 0 && c.birth_ns != birth_ns) return 0;
  if (static_cast<uint64_t>(st.st_size) < c.end) return 0;
  if (c.last_start == 0) return 1;  // no record yet: the magic is all there is to check
  char header[detail::kRecordHeader];
  for (;;) {
    ssize_t n = fs.pread(fd, header, sizeof header, static_cast<off_t>(c.last_start));
    if (n == -EINTR) continue;
    if (n < 0) return static_cast<int>(n);
    return n == static_cast<ssize_t>(sizeof header) && load_u64(header) == c.last_header;
  }
}

// The cursor after `bytes`, read from offset `from` (a record boundary) of the file `st`,
// of which the first `valid` bytes are whole records, the last one `last_payload` bytes long.
LogCursor cursor_after(const struct stat& st, int64_t birth_ns, const LogCursor& before,
                       uint64_t from, std::string_view bytes, size_t valid,
                       std::optional<size_t> last_payload) {
  LogCursor c = before;
  c.dev = st.st_dev;
  c.ino = st.st_ino;
  c.birth_ns = birth_ns;
  c.end = from + valid;
  if (last_payload) {
    const size_t at = valid - detail::kRecordHeader - *last_payload;
    c.last_start = from + at;
    c.last_header = load_u64(bytes.data() + at);
  }
  return c;
}

// mkdir -p with `mode` for the directories it creates (existing ones keep theirs).
std::error_code make_dirs(const std::string& dir, mode_t mode) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    if (dir[pos - 1] == '/') continue;  // "a//b"
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return {errno, std::system_category()};
    }
  }
  return {};
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Removes temp files of dead processes below `dir_fd` (which it closes). Returns how many.
size_t clean_temp_files(int dir_fd, const std::string& where, int depth) {
  DIR* d = ::fdopendir(dir_fd);
  if (!d) {
    ::close(dir_fd);
    return 0;
  }
  size_t removed = 0;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.starts_with(kTempPrefix)) {
      // ".kagi-tmp-<pid>-<n>": a live process may be mid-commit; leave its file alone.
      pid_t pid = 0;
      std::string_view rest = name.substr(kTempPrefix.size());
      auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
      if (ec == std::errc() && pid > 0 && (pid == ::getpid() || process_alive(pid))) continue;
      if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) {
        ++removed;
        util::log_info("store: removed leftover temp file " + where + std::string(name));
      }
      continue;
    }
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir =
          ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir && depth < kMaxCleanDepth) {
      int sub = ::openat(::dirfd(d), e->d_name, kDirFlags);
      if (sub >= 0) removed += clean_temp_files(sub, where + std::string(name) + "/", depth + 1);
    }
  }
  ::closedir(d);
  return removed;
}

}  // namespace

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
  int fd = fs.open_at(AT_FDCWD, options.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) {
    ec = sys(fd);
    return nullptr;
  }
  std::unique_ptr<DataDir> dir(new DataDir(options.dir, fd, options, fs));
  int scan_fd = ::openat(fd, ".", kDirFlags);
  if (scan_fd >= 0) dir->cleaned_ = clean_temp_files(scan_fd, options.dir + "/", 0);
  return dir;
}

DataDir::DataDir(std::string dir, int root_fd, const DataOptions& options, FileSystem& fs)
    : dir_(std::move(dir)),
      root_fd_(root_fd),
      fsync_(options.fsync),
      file_mode_(options.group_readable ? 0640 : 0600),
      dir_mode_(options.group_readable ? 0750 : 0700),
      fs_(fs) {}

DataDir::~DataDir() { fs_.close(root_fd_); }

Status DataDir::check_guard(std::string_view op, std::string_view path,
                            const lock::Guard& guard) const {
  if (!guard.held()) {
    // A revoked guard says so (held past locks.max_hold_ms, or revoked from the admin page):
    // the caller learns why its write was refused, not only that it was.
    if (const std::error_code why = guard.verify(); why == lock::Errc::kRevoked) {
      return Status::failed(why, op, path, "lock '" + guard.name() + "'");
    }
    // A released guard may no longer know its name.
    return Status::failed(Errc::kNotHeld, op, path,
                          guard.name().empty()
                              ? std::string("guard (released, moved-from or empty)")
                              : "lock '" + guard.name() + "'");
  }
  Binding previous;
  {
    std::lock_guard lock(bindings_mu_);
    auto [it, inserted] = bindings_.try_emplace(std::string(path), Binding{guard.name(), false});
    if (inserted && bindings_.size() > kMaxBindings) {
      bindings_.clear();
      bindings_.try_emplace(std::string(path), Binding{guard.name(), false});
      return {};
    }
    if (inserted || it->second.lock == guard.name()) return {};
    previous = it->second;
    it->second.warned = true;
  }
  mismatches_.fetch_add(1, std::memory_order_relaxed);
  if (!previous.warned) {
    util::log_warn("store: " + std::string(op) + " " + std::string(path) + " under lock '" +
                   guard.name() + "', but it was first used under lock '" + previous.lock +
                   "': a file must be protected by the same lock everywhere (logged once)");
  }
  return {};
}

int DataDir::open_parent(const std::vector<std::string_view>& segments, bool create,
                         std::string* failed_step) const {
  int fd = root_fd_;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    std::string name(segments[i]);
    int next = fs_.open_at(fd, name.c_str(), kDirFlags, 0);
    if (next == -ENOENT && create) {
      int r = fs_.mkdir_at(fd, name.c_str(), dir_mode_);
      if (r == 0 && fsync_) r = fs_.fsync(fd);  // the new directory's entry must be durable
      if (r < 0 && r != -EEXIST) {
        *failed_step = "mkdir " + std::string(segments[0].data(), segments[i].end());
        close_parent(fd);
        return r;
      }
      next = fs_.open_at(fd, name.c_str(), kDirFlags, 0);
    }
    if (next == -ENOTDIR) {
      // O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR: tell a symlink from a file.
      struct stat st {};
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        next = -ELOOP;
      }
    }
    if (next < 0) {
      *failed_step = "open directory " + std::string(segments[0].data(), segments[i].end());
      close_parent(fd);
      return next;
    }
    close_parent(fd);
    fd = next;
  }
  return fd;
}

void DataDir::close_parent(int fd) const {
  if (fd >= 0 && fd != root_fd_) fs_.close(fd);
}

int DataDir::open_direct(std::string_view path, int flags) const {
  if (!direct_open_.load(std::memory_order_relaxed)) return kWalk;
  const std::string p(path);
  const int fd = fs_.open_beneath(root_fd_, p.c_str(), flags);
  if (fd >= 0 || fd == -ENOENT) return fd;
  if (fd == -ENOSYS || fd == -EPERM) direct_open_.store(false, std::memory_order_relaxed);
  return kWalk;
}

int DataDir::open_readonly(const std::vector<std::string_view>& segments, std::string_view path,
                           std::string* failed_step) const {
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
  if (int fd = open_direct(path, kFlags); fd != kWalk) return fd;
  int parent = open_parent(segments, false, failed_step);
  if (parent < 0) return parent;
  std::string leaf(segments.back());
  int fd = fs_.open_at(parent, leaf.c_str(), kFlags, 0);
  close_parent(parent);
  if (fd < 0) *failed_step = "open";
  return fd;
}

Result<std::string> DataDir::read(const lock::Guard& guard, std::string_view path) const {
  if (Status s = check_path("read", path); !s.ok()) return s;
  if (Status s = check_guard("read", path, guard); !s.ok()) return s;
  std::string step;
  int fd = open_readonly(path_segments(path), path, &step);
  if (fd == -ENOENT) return std::string();
  if (fd < 0) return open_failed(fd, "read", path, step);
  std::string bytes;
  long r = read_from(fs_, fd, 0, bytes);
  fs_.close(fd);
  if (r < 0) return Status::failed(sys(r), "read", path, "read");
  return bytes;
}

Result<bool> DataDir::exists(const lock::Guard& guard, std::string_view path) const {
  if (Status s = check_path("exists", path); !s.ok()) return s;
  if (Status s = check_guard("exists", path, guard); !s.ok()) return s;
  auto segments = path_segments(path);
  std::string step;
  int parent = open_parent(segments, false, &step);
  if (parent == -ENOENT) return false;
  if (parent < 0) return open_failed(parent, "exists", path, step);
  std::string leaf(segments.back());
  int fd = fs_.open_at(parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  close_parent(parent);
  if (fd == -ENOENT) return false;
  if (fd < 0) return open_failed(fd, "exists", path, "open");
  fs_.close(fd);
  return true;
}

Status DataDir::commit(const lock::ExclusiveGuard& guard, std::string_view path,
                       std::string_view bytes) {
  if (Status s = check_path("commit", path); !s.ok()) return s;
  if (Status s = check_guard("commit", path, guard); !s.ok()) return s;
  auto segments = path_segments(path);
  std::string step;
  int parent = open_parent(segments, true, &step);
  if (parent < 0) return open_failed(parent, "commit", path, step);

  std::string temp = std::string(kTempPrefix) + std::to_string(util::current_pid()) + "-" +
                     std::to_string(temp_counter.fetch_add(1, std::memory_order_relaxed));
  int fd = fs_.open_at(parent, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       file_mode_);
  if (fd < 0) {
    close_parent(parent);
    return Status::failed(sys(fd), "commit", path, "create temp file");
  }
  // From here on every failure removes the temp file: the target was never touched.
  auto fail = [&](std::error_code ec, std::string_view failed_step) {
    if (fd >= 0) fs_.close(fd);
    fs_.unlink_at(parent, temp.c_str());
    close_parent(parent);
    return Status::failed(ec, "commit", path, failed_step);
  };
  if (long r = write_all(fs_, fd, bytes, -1); r < 0) return fail(sys(r), "write");
  if (fsync_) {
    if (int r = fs_.fsync(fd); r < 0) return fail(sys(r), "fsync");
  }
  int closed = fs_.close(fd);
  fd = -1;
  if (closed < 0) return fail(sys(closed), "close");
  if (std::error_code ec = guard.verify()) {
    return fail(ec, "fence (lock '" + guard.name() + "')");
  }
  std::string leaf(segments.back());
  if (int r = fs_.rename_at(parent, temp.c_str(), parent, leaf.c_str()); r < 0) {
    return fail(sys(r), "rename");
  }
  Status result;
  if (fsync_) {
    if (int r = fs_.fsync(parent); r < 0) {
      result = Status::failed(sys(r), "commit", path,
                              "fsync directory (the new content is in place but may not "
                              "survive a power loss)");
    }
  }
  close_parent(parent);
  return result;
}

Status DataDir::remove(const lock::ExclusiveGuard& guard, std::string_view path) {
  if (Status s = check_path("remove", path); !s.ok()) return s;
  if (Status s = check_guard("remove", path, guard); !s.ok()) return s;
  auto segments = path_segments(path);
  std::string step;
  int parent = open_parent(segments, false, &step);
  if (parent == -ENOENT) return {};
  if (parent < 0) return open_failed(parent, "remove", path, step);
  Status result;
  std::string leaf(segments.back());
  if (std::error_code ec = guard.verify()) {
    result = Status::failed(ec, "remove", path, "fence (lock '" + guard.name() + "')");
  } else if (int r = fs_.unlink_at(parent, leaf.c_str()); r < 0 && r != -ENOENT) {
    result = Status::failed(sys(r), "remove", path, "unlink");
  } else if (r == 0 && fsync_) {
    if (int f = fs_.fsync(parent); f < 0)
      result = Status::failed(sys(f), "remove", path, "fsync directory");
  }
  close_parent(parent);
  {
    std::lock_guard lock(logs_mu_);
    logs_.erase(std::string(path));
  }
  return result;
}

Status DataDir::append(const lock::ExclusiveGuard& guard, std::string_view path,
                       std::string_view record) {
  if (Status s = check_path("append", path); !s.ok()) return s;
  if (Status s = check_guard("append", path, guard); !s.ok()) return s;
  if (record.size() > detail::kMaxRecord) {
    return Status::failed(Errc::kTooLarge, "append", path,
                          std::to_string(record.size()) + " bytes (limit 16 MiB)");
  }
  // The usual case, an existing log, in one open; the walk creates what is missing (and
  // keeps the directory to make the new entry durable).
  int parent = -1;
  bool created = false;
  int fd = open_direct(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    auto segments = path_segments(path);
    std::string step;
    parent = open_parent(segments, true, &step);
    if (parent < 0) return open_failed(parent, "append", path, step);
    std::string leaf(segments.back());
    fd = fs_.open_at(parent, leaf.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd == -ENOENT) {
      fd = fs_.open_at(parent, leaf.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       file_mode_);
      created = fd >= 0;
    }
    if (fd < 0) {
      close_parent(parent);
      return open_failed(fd, "append", path, "open");
    }
  }
  std::string key(path);
  auto forget = [&] {
    std::lock_guard lock(logs_mu_);
    logs_.erase(key);
  };
  auto fail = [&](Status s) {
    fs_.close(fd);
    close_parent(parent);
    forget();
    return s;
  };

  struct stat st {};
  int64_t birth_ns = 0;
  if (int r = fs_.fstat_birth(fd, &st, &birth_ns); r < 0)
    return fail(Status::failed(sys(r), "append", path, "fstat"));
  const auto size = static_cast<uint64_t>(st.st_size);

  // Where do whole records end? Start from what this process verified before, if it still
  // holds; verify whatever other processes appended since.
  LogCursor known;
  {
    std::lock_guard lock(logs_mu_);
    if (auto it = logs_.find(key); it != logs_.end()) known = it->second;
  }
  const int holds = log_cursor_holds(fs_, fd, st, birth_ns, known);
  if (holds < 0) return fail(Status::failed(sys(holds), "append", path, "read"));
  if (!holds) known = LogCursor{};
  const uint64_t start = known.end;
  uint64_t valid_end = start;
  std::vector<detail::Damage> damage;
  uint64_t parsed_from = start;
  if (start < size || start == 0) {
    std::string bytes;
    if (long r = read_from(fs_, fd, static_cast<off_t>(start), bytes, st.st_size); r < 0) {
      return fail(Status::failed(sys(r), "append", path, "read"));
    }
    std::string_view view = bytes;
    if (start == 0) {
      switch (detail::check_header(view)) {
        case detail::Header::kForeign:
          return fail(Status::failed(Errc::kCorrupt, "append", path,
                                     "not a kagi log (no KAGILOG1 header); refusing to append"));
        case detail::Header::kPartial:
          valid_end = 0;
          break;
        case detail::Header::kValid:
          parsed_from = detail::kLogMagic.size();
          valid_end = parsed_from + detail::parse_records(view.substr(detail::kLogMagic.size()),
                                                          nullptr, &damage);
          break;
      }
    } else {
      valid_end = start + detail::parse_records(view, nullptr, &damage);
    }
  }
  // Damage followed by intact records stays where it is (kagi-fsck can show and repair it);
  // only a tail that no intact record follows is torn and cut below.
  if (!damage.empty()) report_damage("append", key, st, parsed_from, damage);

  // Last check before anything changes on disk: a stale holder must not even trim the tail,
  // which might be the current holder's record in progress.
  if (std::error_code ec = guard.verify()) {
    return fail(Status::failed(ec, "append", path, "fence (lock '" + guard.name() + "')"));
  }
  if (valid_end < size) {
    if (int r = fs_.ftruncate(fd, static_cast<off_t>(valid_end)); r < 0) {
      return fail(Status::failed(sys(r), "append", path, "truncate torn tail"));
    }
    util::log_warn("store: append " + key + ": dropped a torn tail of " +
                   std::to_string(size - valid_end) +
                   " bytes (a writer died mid-append; its record was never acknowledged)");
  }

  std::string frame;
  frame.reserve(detail::kLogMagic.size() + detail::kRecordHeader + record.size());
  if (valid_end == 0) frame.append(detail::kLogMagic);
  detail::encode_record(frame, record);
  // A failed write or fsync is undone so that an unacknowledged record never shows up later.
  auto undo = [&](long r, std::string_view failed_step) {
    fs_.ftruncate(fd, static_cast<off_t>(valid_end));
    return fail(Status::failed(sys(r), "append", path, failed_step));
  };
  if (long r = write_all(fs_, fd, frame, static_cast<off_t>(valid_end)); r < 0) {
    return undo(r, "write");
  }
  if (fsync_) {
    if (int r = fs_.fsync(fd); r < 0) return undo(r, "fsync");
    if (created) {
      if (int r = fs_.fsync(parent); r < 0) return undo(r, "fsync directory");
    }
  }
  fs_.close(fd);
  close_parent(parent);
  const size_t record_at = frame.size() - detail::kRecordHeader - record.size();
  LogCursor after{.dev = st.st_dev,
                  .ino = st.st_ino,
                  .birth_ns = birth_ns,
                  .end = valid_end + frame.size(),
                  .last_start = valid_end + record_at,
                  .last_header = load_u64(frame.data() + record_at)};
  std::lock_guard lock(logs_mu_);
  if (logs_.size() >= 4096) logs_.clear();  // a bounded hint cache, not a registry
  logs_[key] = after;
  return {};
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
  std::lock_guard lock(logs_mu_);
  logs_.erase(std::string(path));
  return result;
}

Result<std::vector<std::string>> DataDir::read_log(const lock::Guard& guard, std::string_view path,
                                                   size_t last_n) const {
  if (Status s = check_path("read_log", path); !s.ok()) return s;
  if (Status s = check_guard("read_log", path, guard); !s.ok()) return s;
  std::string step;
  int fd = open_readonly(path_segments(path), path, &step);
  if (fd == -ENOENT) return std::vector<std::string>();
  if (fd < 0) return open_failed(fd, "read_log", path, step);
  std::string bytes;
  struct stat st {};
  long r = fs_.fstat(fd, &st);
  if (r == 0) r = read_from(fs_, fd, 0, bytes, st.st_size);
  fs_.close(fd);
  if (r < 0) return Status::failed(sys(r), "read_log", path, "read");
  std::vector<std::string> records;
  std::vector<detail::Damage> damage;
  std::string_view view = bytes;
  switch (detail::check_header(view)) {
    case detail::Header::kForeign:
      return Status::failed(Errc::kCorrupt, "read_log", path,
                            "not a kagi log (no KAGILOG1 header)");
    case detail::Header::kPartial:
      return records;
    case detail::Header::kValid:
      detail::parse_records(view.substr(detail::kLogMagic.size()), &records, &damage);
      break;
  }
  if (!damage.empty()) report_damage("read_log", path, st, detail::kLogMagic.size(), damage);
  if (records.size() > last_n) {
    records.erase(records.begin(), records.end() - static_cast<std::ptrdiff_t>(last_n));
  }
  return records;
}

Result<LogTail> DataDir::read_log_since(const lock::Guard& guard, std::string_view path,
                                        LogCursor& cursor) const {
  if (Status s = check_path("read_log", path); !s.ok()) return s;
  if (Status s = check_guard("read_log", path, guard); !s.ok()) return s;
  LogTail tail;
  std::string step;
  int fd = open_readonly(path_segments(path), path, &step);
  if (fd == -ENOENT) {
    tail.restarted = true;
    cursor = LogCursor{};
    return tail;
  }
  if (fd < 0) return open_failed(fd, "read_log", path, step);
  struct stat st {};
  std::string bytes;
  int64_t birth_ns = 0;
  int holds = fs_.fstat_birth(fd, &st, &birth_ns);
  if (holds == 0) holds = log_cursor_holds(fs_, fd, st, birth_ns, cursor);
  const uint64_t start = holds > 0 ? cursor.end : 0;
  long r = holds < 0 ? holds : read_from(fs_, fd, static_cast<off_t>(start), bytes, st.st_size);
  fs_.close(fd);
  if (r < 0) return Status::failed(sys(r), "read_log", path, "read");

  std::string_view view = bytes;
  uint64_t from = start;
  LogCursor before = cursor;
  if (start == 0) {
    tail.restarted = true;
    before = LogCursor{};
    switch (detail::check_header(view)) {
      case detail::Header::kForeign:
        return Status::failed(Errc::kCorrupt, "read_log", path,
                              "not a kagi log (no KAGILOG1 header)");
      case detail::Header::kPartial:
        cursor = LogCursor{};  // a torn creation: nothing to read yet
        return tail;
      case detail::Header::kValid:
        view.remove_prefix(detail::kLogMagic.size());
        from = detail::kLogMagic.size();
        break;
    }
  }
  std::vector<detail::Damage> damage;
  const size_t valid = detail::parse_records(view, &tail.records, &damage);
  if (!damage.empty()) report_damage("read_log", path, st, from, damage);
  std::optional<size_t> last_payload;
  if (!tail.records.empty()) last_payload = tail.records.back().size();
  cursor = cursor_after(st, birth_ns, before, from, view, valid, last_payload);
  return tail;
}

void DataDir::report_damage(std::string_view op, std::string_view path, const struct stat& st,
                            uint64_t from, const std::vector<detail::Damage>& spans) const {
  for (const detail::Damage& d : spans) {
    const uint64_t offset = from + d.offset;
    {
      std::string key = std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
                        std::to_string(offset);
      std::lock_guard lock(damage_mu_);
      if (reported_.size() >= 4096) reported_.clear();
      if (!reported_.insert(std::move(key)).second) continue;
    }
    damaged_.fetch_add(1, std::memory_order_relaxed);
    util::log_error("store: " + std::string(op) + " " + std::string(path) + ": damaged span of " +
                    std::to_string(d.length) + " bytes at offset " + std::to_string(offset) +
                    ", intact records after it: skipped and kept on disk, the records in it are "
                    "lost. List the damage with kagi-fsck --data " +
                    dir_ +
                    "; add --repair to rewrite the log without it (after a backup, under the "
                    "log's lock)");
    damage_log().record(
        DamageEvent{std::chrono::system_clock::now(), std::string(path), offset, d.length});
  }
}

}  // namespace kagi::store
