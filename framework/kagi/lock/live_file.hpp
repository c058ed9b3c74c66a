// lock/live_file.hpp — one file per live process in a folder; a dead process's file is found
// by its lock and removed by whoever reads the folder next.
//
// Every kagi process publishes what other processes read without a server: its lock registry
// (lock/registry.hpp) and its host-wide statistics (stats/host_stats.hpp). Both use this one
// mechanism:
//
//   owner:   auto file = LiveFile::create(dir, ".reg", prepare, ec);  // flock(LOCK_EX) for life
//   readers: for (auto& name : live_file_names(dir, ".reg"))
//              if (open_if_alive(dir + "/" + name, O_RDONLY, fd) == Liveness::kAlive) read(fd);
//
// The owner holds flock(LOCK_EX) on its file from before the file appears under its name
// until the process ends, however it ends: the kernel drops the lock of a SIGKILLed process.
// A reader that can take LOCK_SH on a file therefore knows its owner is gone, and
// open_if_alive() removes the file. Names are "<pid>-<creation time ns><ext>", so a reused
// pid never inherits an old file.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/util/unique_fd.hpp>

namespace kagi::lock {

class LiveFile {
 public:
  // Creates `dir`/<stem><ext> (mode 0600; `dir` must exist). `prepare(fd)` runs on the locked
  // file before it gets its name (size it, write a header), so no reader ever sees it half
  // made; it returns false with errno set to give up. Null on failure, with `ec` set.
  static std::unique_ptr<LiveFile> create(const std::string& dir, std::string_view ext,
                                          const std::function<bool(int fd)>& prepare,
                                          std::error_code& ec);
  // Removes the file (readers then see nothing rather than a dead file), then drops the lock.
  ~LiveFile();
  LiveFile(const LiveFile&) = delete;
  LiveFile& operator=(const LiveFile&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // "<pid>-<creation time ns>": the name without folder and extension, to name companions.
  const std::string& stem() const { return stem_; }

 private:
  LiveFile(std::string path, std::string stem, util::UniqueFd fd);
  std::string path_, stem_;
  util::UniqueFd fd_;
};

enum class Liveness {
  kAlive,       // its owner holds it: `fd` is open on it
  kDead,        // nobody holds it: its owner is gone, and the file was removed
  kUnreadable,  // it could not be opened (gone meanwhile, or no permission)
};

// Opens `path` with `flags` (O_RDONLY or O_RDWR; O_CLOEXEC is added) and says whether its
// owner is alive. A dead owner's file is removed, along with each `companions` file (the same
// path with its extension replaced by each given one).
Liveness open_if_alive(const std::string& path, int flags, util::UniqueFd& fd,
                       const std::vector<std::string_view>& companions = {});

// The names (not paths) of the files in `dir` that end in `ext`, in no order; none when `dir`
// cannot be read.
std::vector<std::string> live_file_names(const std::string& dir, std::string_view ext);

}  // namespace kagi::lock
