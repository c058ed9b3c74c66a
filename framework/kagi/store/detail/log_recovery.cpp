#include <kagi/store/detail/log_recovery.hpp>

#include <cerrno>

#include <kagi/store/detail/file_io.hpp>

namespace kagi::store::detail {

namespace {

constexpr size_t kMaxRememberedLogs = 4096;

}  // namespace

namespace {

int64_t change_time_ns(const struct stat& st) {
  return st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
}

// The same file as `c` (identity and birth time), no shorter than its end.
bool same_file_no_shorter(const struct stat& st, int64_t birth_ns, const LogCursor& c) {
  if (c.end == 0 || c.dev != st.st_dev || c.ino != st.st_ino) return false;
  if (c.birth_ns != 0 && birth_ns != 0 && c.birth_ns != birth_ns) return false;
  return static_cast<uint64_t>(st.st_size) >= c.end;
}

}  // namespace

long read_past_cursor(FileSystem& fs, int fd, const struct stat& st, int64_t birth_ns,
                      const LogCursor& c, std::string& bytes, bool held_since) {
  if (log_unchanged_since(st, birth_ns, c, held_since)) {
    bytes.clear();
    return static_cast<long>(c.end);
  }
  if (same_file_no_shorter(st, birth_ns, c)) {
    // From the cursor's last record (none yet: the magic is all there is to check).
    const uint64_t from = c.last_start != 0 ? c.last_start : c.end;
    if (long r = read_from(fs, fd, static_cast<off_t>(from), bytes, st.st_size); r < 0) return r;
    const bool holds = c.last_start == 0 ||
                       (bytes.size() >= kRecordHeader && load_u64(bytes.data()) == c.last_header);
    if (holds && bytes.size() >= c.end - from) {
      bytes.erase(0, static_cast<size_t>(c.end - from));
      return static_cast<long>(c.end);
    }
  }
  if (long r = read_from(fs, fd, 0, bytes, st.st_size); r < 0) return r;
  return 0;
}

bool log_unchanged_since(const struct stat& st, int64_t birth_ns, const LogCursor& c,
                         bool held_since) {
  const bool same_file_and_size =
      S_ISREG(st.st_mode) && c.end != 0 && c.birth_ns != 0 && st.st_dev == c.dev &&
      st.st_ino == c.ino && birth_ns == c.birth_ns && static_cast<uint64_t>(st.st_size) == c.end;
  if (held_since) return same_file_and_size && st.st_nlink != 0;
  return same_file_and_size && c.ctime_ns != 0 && change_time_ns(st) == c.ctime_ns;
}

bool same_place(const LogCursor& a, const LogCursor& b) {
  return a.dev == b.dev && a.ino == b.ino && a.birth_ns == b.birth_ns && a.end == b.end &&
         a.last_start == b.last_start && a.last_header == b.last_header;
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
                    const LogCursor& known, std::string_view path, LogEnd* end, bool held_since) {
  std::string bytes;
  const long at = read_past_cursor(fs, fd, st, birth_ns, known, bytes, held_since);
  if (at < 0) return Status::failed(sys_error(at), "append", path, "read");
  const auto start = static_cast<uint64_t>(at);
  end->valid_end = start;
  end->parsed_from = start;
  end->damage.clear();
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
