#include "fsck/fsck.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::apps::fsck {
namespace {

namespace detail = store::detail;

constexpr int kMaxDepth = 32;
constexpr std::string_view kBackupMarker = ".bak-";

void scan_file(int dir_fd, const std::string& rel, const char* name, std::vector<LogReport>& logs,
               std::vector<std::string>& errors) {
  const util::UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    errors.push_back(rel + ": open: " + std::strerror(errno));
    return;
  }
  char magic[8];
  const ssize_t n = ::pread(fd.get(), magic, sizeof magic, 0);
  if (n != static_cast<ssize_t>(sizeof magic) ||
      std::string_view(magic, sizeof magic) != detail::kLogMagic) {
    return;  // not a log (or an empty one): nothing to check
  }
  std::string bytes;
  // The size at this moment: a log that grows meanwhile is scanned as it was (a snapshot).
  if (const long err = detail::read_from(store::real_fs(), fd.get(), 0, bytes); err != 0) {
    errors.push_back(rel + ": read: " + std::strerror(static_cast<int>(-err)));
    return;
  }
  LogReport report;
  report.path = rel;
  report.bytes = bytes.size();
  std::string_view records = std::string_view(bytes).substr(detail::kLogMagic.size());
  std::vector<std::string> payloads;
  const size_t valid = detail::parse_records(records, &payloads, &report.damage);
  for (auto& d : report.damage) d.offset += detail::kLogMagic.size();
  report.records = payloads.size();
  report.torn_tail = records.size() - valid;
  logs.push_back(std::move(report));
}

void walk(util::UniqueFd dir_fd, const std::string& prefix, int depth, std::vector<LogReport>& logs,
          std::vector<std::string>& errors) {
  // The stream owns the descriptor from here on (closedir closes it).
  std::unique_ptr<DIR, int (*)(DIR*)> stream(::fdopendir(dir_fd.get()), ::closedir);
  if (!stream) {
    errors.push_back((prefix.empty() ? "." : prefix) + ": " + std::strerror(errno));
    return;
  }
  (void)dir_fd.release();
  DIR* d = stream.get();
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string rel = prefix + name;
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxDepth) continue;
      util::UniqueFd sub(
          ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) {
        errors.push_back(rel + ": open directory: " + std::strerror(errno));
        continue;
      }
      walk(std::move(sub), rel + "/", depth + 1, logs, errors);
    } else if (S_ISREG(st.st_mode) && name.find(kBackupMarker) == std::string::npos) {
      // (Backups kagi-fsck made hold the damage on purpose: not scanned again.)
      scan_file(::dirfd(d), rel, e->d_name, logs, errors);
    }
  }
}

bool is_simple_name(std::string_view s) {
  return !s.empty() && s.find('/') == std::string_view::npos;
}

}  // namespace

uint64_t LogReport::damaged_bytes() const {
  uint64_t total = 0;
  for (const auto& d : damage) total += d.length;
  return total;
}

std::vector<LogReport> scan(const std::string& data_dir, std::vector<std::string>& errors) {
  std::vector<LogReport> logs;
  util::UniqueFd fd(::open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    errors.push_back(data_dir + ": " + std::strerror(errno));
    return logs;
  }
  walk(std::move(fd), "", 0, logs, errors);
  std::sort(logs.begin(), logs.end(),
            [](const LogReport& a, const LogReport& b) { return a.path < b.path; });
  return logs;
}

std::optional<std::string> app_lock_for(std::string_view path) {
  // Kept in step with apps/bbs/board.hpp and apps/chat/room.cpp (tested against them).
  struct Layout {
    std::string_view folder, lock_prefix;
  };
  static constexpr Layout kLayouts[] = {{"bbs/boards/", "bbs/board/"},
                                        {"chat/rooms/", "chat/room/"}};
  constexpr std::string_view kSuffix = ".log";
  for (const Layout& l : kLayouts) {
    if (!path.starts_with(l.folder) || !path.ends_with(kSuffix)) continue;
    const std::string_view name =
        path.substr(l.folder.size(), path.size() - l.folder.size() - kSuffix.size());
    if (is_simple_name(name)) return std::string(l.lock_prefix) + std::string(name);
  }
  return std::nullopt;
}

store::Result<RepairResult> repair(store::DataDir& data, const lock::ExclusiveGuard& guard,
                                   std::string_view path, std::string_view stamp) {
  RepairResult result;
  // Read under the lock: the scan may be stale (a compaction may have removed the damage).
  store::Result<std::string> raw = data.read(guard, path);
  if (!raw.ok()) return raw.status();
  const std::string& bytes = raw.value();
  if (detail::check_header(bytes) != detail::Header::kValid) {
    return store::Status::failed(store::Errc::kCorrupt, "repair", path,
                                 "not a kagi log (no KAGILOG1 header); left alone");
  }
  std::vector<std::string> records;
  std::vector<detail::Damage> damage;
  detail::parse_records(std::string_view(bytes).substr(detail::kLogMagic.size()), &records,
                        &damage);
  result.kept = records.size();
  if (damage.empty()) return result;
  for (const auto& d : damage) result.dropped += d.length;

  result.backup = std::string(path) + std::string(kBackupMarker) + std::string(stamp);
  if (store::Status s = data.commit(guard, result.backup, bytes); !s.ok()) return s;
  if (store::Status s = data.rewrite_log(guard, path, records); !s.ok()) return s;
  return result;
}

}  // namespace kagi::apps::fsck
