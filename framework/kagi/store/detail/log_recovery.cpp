#include <kagi/store/detail/log_recovery.hpp>

#include <cerrno>

#include <kagi/store/detail/file_io.hpp>

namespace kagi::store::detail {

namespace {

constexpr size_t kMaxRememberedLogs = 4096;

}  // namespace

bool log_cursor_plausible(const struct stat& st, int64_t birth_ns, const LogCursor& c) {
  if (c.end == 0 || c.dev != st.st_dev || c.ino != st.st_ino) return false;
  if (c.birth_ns != 0 && birth_ns != 0 && c.birth_ns != birth_ns) return false;
  return static_cast<uint64_t>(st.st_size) >= c.end;
}

int log_cursor_holds(FileSystem& fs, int fd, const struct stat& st, int64_t birth_ns,
                     const LogCursor& c) {
  if (!log_cursor_plausible(st, birth_ns, c)) return 0;
  if (c.last_start == 0) return 1;  // no record yet: the magic is all there is to check
  char header[kRecordHeader];
  for (;;) {
    ssize_t n = fs.pread(fd, header, sizeof header, static_cast<off_t>(c.last_start));
    if (n == -EINTR) continue;
    if (n < 0) return static_cast<int>(n);
    return n == static_cast<ssize_t>(sizeof header) && load_u64(header) == c.last_header;
  }
}

namespace {
int64_t change_time_ns(const struct stat& st) {
  return st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
}
}  // namespace

bool log_unchanged_since(const struct stat& st, int64_t birth_ns, const LogCursor& c) {
  return S_ISREG(st.st_mode) && c.end != 0 && c.birth_ns != 0 && c.ctime_ns != 0 &&
         st.st_dev == c.dev && st.st_ino == c.ino && birth_ns == c.birth_ns &&
         static_cast<uint64_t>(st.st_size) == c.end && change_time_ns(st) == c.ctime_ns;
}

LogCursor cursor_after(const struct stat& st, int64_t birth_ns, const LogCursor& before,
                       uint64_t from, std::string_view bytes, size_t valid,
                       std::optional<size_t> last_payload) {
  LogCursor c = before;
  c.dev = st.st_dev;
  c.ino = st.st_ino;
  c.birth_ns = birth_ns;
  c.ctime_ns = change_time_ns(st);
  c.end = from + valid;
  if (last_payload) {
    const size_t at = valid - kRecordHeader - *last_payload;
    c.last_start = from + at;
    c.last_header = load_u64(bytes.data() + at);
  }
  return c;
}

Status find_log_end(FileSystem& fs, int fd, const struct stat& st, int64_t birth_ns,
                    const LogCursor& known, std::string_view path, LogEnd* end) {
  const auto size = static_cast<uint64_t>(st.st_size);
  end->parsed_from = known.end;
  end->damage.clear();
  if (log_unchanged_since(st, birth_ns, known)) {
    end->valid_end = known.end;  // the file the cursor read to its end: nothing to read
    return {};
  }
  const int holds = log_cursor_holds(fs, fd, st, birth_ns, known);
  if (holds < 0) return Status::failed(sys_error(holds), "append", path, "read");
  const uint64_t start = holds ? known.end : 0;
  end->valid_end = start;
  end->parsed_from = start;
  end->damage.clear();
  if (start == size && start != 0) return {};  // nothing appended since: the usual case

  std::string bytes;
  if (long r = read_from(fs, fd, static_cast<off_t>(start), bytes, st.st_size); r < 0) {
    return Status::failed(sys_error(r), "append", path, "read");
  }
  std::string_view view = bytes;
  if (start != 0) {
    end->valid_end = start + parse_records(view, nullptr, &end->damage);
    return {};
  }
  switch (check_header(view)) {
    case Header::kForeign:
      return Status::failed(Errc::kCorrupt, "append", path,
                            "not a kagi log (no KAGILOG1 header); refusing to append");
    case Header::kPartial:
      end->valid_end = 0;  // a torn creation: the magic is written again
      break;
    case Header::kValid:
      end->parsed_from = kLogMagic.size();
      end->valid_end =
          kLogMagic.size() + parse_records(view.substr(kLogMagic.size()), nullptr, &end->damage);
      break;
  }
  return {};
}

LogCursor LogEnds::find(const std::string& path) const {
  util::MutexLock held(mu_);
  auto it = ends_.find(path);
  return it != ends_.end() ? it->second : LogCursor{};
}

void LogEnds::remember(const std::string& path, const LogCursor& cursor) {
  util::MutexLock held(mu_);
  if (ends_.size() >= kMaxRememberedLogs) ends_.clear();
  ends_[path] = cursor;
}

void LogEnds::forget(std::string_view path) {
  util::MutexLock held(mu_);
  ends_.erase(std::string(path));
}

}  // namespace kagi::store::detail
