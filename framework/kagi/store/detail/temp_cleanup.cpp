#include <kagi/store/detail/temp_cleanup.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <memory>
#include <string_view>

#include <kagi/store/detail/atomic_commit.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {

namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
// Directories deeper than this are not searched for leftover temp files.
constexpr int kMaxCleanDepth = 32;

// An open directory stream; closedir() also closes the descriptor fdopendir() took over.
struct CloseDir {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirStream = std::unique_ptr<DIR, CloseDir>;

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// ".kagi-tmp-<pid>-<n>" of this or another live process: a commit may be under way.
bool owner_alive(std::string_view name) {
  pid_t pid = 0;
  const std::string_view rest = name.substr(kTempPrefix.size());
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
  return ec == std::errc() && pid > 0 && (pid == ::getpid() || process_alive(pid));
}

bool is_directory(DIR* d, const dirent& e) {
  if (e.d_type != DT_UNKNOWN) return e.d_type == DT_DIR;
  struct stat st {};
  return ::fstatat(::dirfd(d), e.d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

size_t clean(util::UniqueFd dir_fd, const std::string& where, int depth) {
  DirStream d(::fdopendir(dir_fd.get()));
  if (!d) return 0;
  (void)dir_fd.release();  // the stream owns it now
  size_t removed = 0;
  while (dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.starts_with(kTempPrefix)) {
      if (owner_alive(name)) continue;
      if (::unlinkat(::dirfd(d.get()), e->d_name, 0) == 0) {
        ++removed;
        util::log_info("store: removed leftover temp file " + where + std::string(name));
      }
      continue;
    }
    if (depth < kMaxCleanDepth && is_directory(d.get(), *e)) {
      util::UniqueFd sub(::openat(::dirfd(d.get()), e->d_name, kDirFlags));
      if (sub) removed += clean(std::move(sub), where + std::string(name) + "/", depth + 1);
    }
  }
  return removed;
}

}  // namespace

size_t remove_dead_temp_files(int root_fd, const std::string& where) {
  // A descriptor of its own: the stream closes it, and root_fd stays open.
  util::UniqueFd scan(::openat(root_fd, ".", kDirFlags));
  if (!scan) return 0;
  return clean(std::move(scan), where, 0);
}

}  // namespace kagi::store::detail
