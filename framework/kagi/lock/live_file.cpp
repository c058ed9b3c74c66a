#include <kagi/lock/live_file.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace kagi::lock {
namespace {

std::error_code last_error() { return {errno, std::generic_category()}; }

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::unique_ptr<LiveFile> LiveFile::create(const std::string& dir, std::string_view ext,
                                           const std::function<bool(int fd)>& prepare,
                                           std::error_code& ec) {
  const std::string stem = std::to_string(::getpid()) + "-" + std::to_string(realtime_ns());
  const std::string tmp = dir + "/tmp-" + stem;
  const std::string path = dir + "/" + stem + std::string(ext);
  util::UniqueFd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) {
    ec = last_error();
    return nullptr;
  }
  // Locked before it has its name, so no reader takes it for a dead process's file.
  if (::flock(fd.get(), LOCK_EX) != 0 || (prepare && !prepare(fd.get())) ||
      ::rename(tmp.c_str(), path.c_str()) != 0) {
    ec = last_error();
    ::unlink(tmp.c_str());
    return nullptr;
  }
  return std::unique_ptr<LiveFile>(new LiveFile(path, stem, std::move(fd)));
}

LiveFile::LiveFile(std::string path, std::string stem, util::UniqueFd fd)
    : path_(std::move(path)), stem_(std::move(stem)), fd_(std::move(fd)) {}

LiveFile::~LiveFile() { ::unlink(path_.c_str()); }

Liveness open_if_alive(const std::string& path, int flags, util::UniqueFd& fd,
                       const std::vector<std::string_view>& companions) {
  fd.reset(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd) return Liveness::kUnreadable;
  // LOCK_SH succeeds only when nobody holds LOCK_EX: the owner is gone.
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return Liveness::kAlive;
  fd.reset();
  ::unlink(path.c_str());
  const size_t dot = path.rfind('.');
  const std::string base = path.substr(0, dot == std::string::npos ? path.size() : dot);
  for (std::string_view ext : companions) ::unlink((base + std::string(ext)).c_str());
  return Liveness::kDead;
}

std::vector<std::string> live_file_names(const std::string& dir, std::string_view ext) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return names;
  while (dirent* ent = ::readdir(d.get())) {
    std::string_view name = ent->d_name;
    if (name.size() > ext.size() && name.ends_with(ext) && !name.starts_with("tmp-")) {
      names.emplace_back(name);
    }
  }
  return names;
}

}  // namespace kagi::lock
