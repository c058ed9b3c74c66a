#include <kagi/store/detail/log_read.hpp>

#include <sys/stat.h>

#include <optional>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/detail/log_format.hpp>
#include <kagi/store/detail/log_recovery.hpp>

namespace kagi::store::detail {

namespace {

Status not_a_log(std::string_view path) {
  return Status::failed(Errc::kCorrupt, "read_log", path, "not a kagi log (no KAGILOG1 header)");
}

}  // namespace

Result<std::vector<std::string>> read_records(FileSystem& fs, int fd, std::string_view path,
                                              size_t last_n, DamageReporter& damage,
                                              ReadExtent* seen) {
  std::string bytes;
  struct stat st {};
  int64_t birth_ns = 0;
  long r = fs.fstat_birth(fd, &st, &birth_ns);
  if (r == 0) r = read_from(fs, fd, 0, bytes, st.st_size);
  if (r < 0) return Status::failed(sys_error(r), "read_log", path, "read");
  *seen = ReadExtent{FileId{st.st_dev, st.st_ino, birth_ns}, 0, st};

  std::vector<std::string> records;
  std::vector<Damage> spans;
  const std::string_view view = bytes;
  switch (check_header(view)) {
    case Header::kForeign:
      return not_a_log(path);
    case Header::kPartial:
      return records;
    case Header::kValid:
      seen->size =
          kLogMagic.size() + parse_records(view.substr(kLogMagic.size()), &records, &spans);
      break;
  }
  if (!spans.empty()) damage.report("read_log", path, st, kLogMagic.size(), spans);
  if (records.size() > last_n) {
    records.erase(records.begin(), records.end() - static_cast<std::ptrdiff_t>(last_n));
  }
  return records;
}

Result<LogTail> read_records_since(FileSystem& fs, int fd, std::string_view path, LogCursor& cursor,
                                   DamageReporter& damage, ReadExtent* seen, const FileStatus* now,
                                   bool held_since) {
  FileStatus status;
  if (now) {
    status = *now;
  } else if (int r = fs.fstat_birth(fd, &status.st, &status.birth_ns); r < 0) {
    return Status::failed(sys_error(r), "read_log", path, "read");
  }
  const struct stat& st = status.st;
  const int64_t birth_ns = status.birth_ns;
  std::string bytes;
  const long at = read_past_cursor(fs, fd, st, birth_ns, cursor, bytes, held_since);
  if (at < 0) return Status::failed(sys_error(at), "read_log", path, "read");
  const auto start = static_cast<uint64_t>(at);
  *seen = ReadExtent{FileId{st.st_dev, st.st_ino, birth_ns}, 0, st};

  LogTail tail;
  std::string_view view = bytes;
  uint64_t from = start;
  LogCursor before = cursor;
  if (start == 0) {
    tail.restarted = true;
    before = LogCursor{};
    switch (check_header(view)) {
      case Header::kForeign:
        return not_a_log(path);
      case Header::kPartial:
        cursor = LogCursor{};  // a torn creation: nothing to read yet
        return tail;
      case Header::kValid:
        view.remove_prefix(kLogMagic.size());
        from = kLogMagic.size();
        break;
    }
  }
  std::vector<Damage> spans;
  const size_t valid = parse_records(view, &tail.records, &spans);
  seen->size = from + valid;
  if (!spans.empty()) damage.report("read_log", path, st, from, spans);
  std::optional<size_t> last_payload;
  if (!tail.records.empty()) last_payload = tail.records.back().size();
  cursor = cursor_after(st, birth_ns, before, from, view, valid, last_payload);
  return tail;
}

}  // namespace kagi::store::detail
