#include <kagi/store/detail/folder_feed.hpp>

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <kagi/store/detail/make_dirs.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store::detail {
namespace {

std::error_code last_error() { return {errno, std::system_category()}; }

class FolderFeed final : public ChangeFeed {
 public:
  FolderFeed(std::string dir, std::string prefix, util::UniqueFd fd)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), fd_(std::move(fd)) {}

  int fd() const override { return fd_.get(); }

  bool drain(std::vector<std::string>& changed) override {
    alignas(inotify_event) char buf[16 * 1024];
    bool complete = true;
    ssize_t n;
    while ((n = ::read(fd_.get(), buf, sizeof buf)) > 0) {
      for (char* p = buf; p < buf + n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
          complete = false;
          continue;
        }
        std::string_view file(ev->len ? ev->name : "");
        file = file.substr(0, file.find('\0'));
        if (!file.empty() && !file.starts_with(".kagi-")) {  // not the commits' temp files
          changed.push_back(prefix_ + std::string(file));
        }
      }
    }
    return complete;
  }

  bool resume() override KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    if (watch_ >= 0) return true;
    watch_ = ::inotify_add_watch(fd_.get(), dir_.c_str(), IN_MODIFY | IN_MOVED_TO | IN_CREATE);
    return watch_ >= 0;
  }

  void pause() override KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    if (watch_ < 0) return;
    ::inotify_rm_watch(fd_.get(), watch_);
    watch_ = -1;
  }

  bool active() const override KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    return watch_ >= 0;
  }

 private:
  const std::string dir_;
  const std::string prefix_;
  const util::UniqueFd fd_;
  mutable util::Mutex mu_;
  int watch_ KAGI_GUARDED_BY(mu_) = -1;  // the inotify watch descriptor; -1: paused
};

}  // namespace

std::unique_ptr<ChangeFeed> watch_folder(std::string dir, std::string prefix, mode_t dir_mode,
                                         std::error_code& ec) {
  ec = make_dirs(dir, dir_mode);
  if (ec) return nullptr;
  util::UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd) {
    ec = last_error();
    return nullptr;
  }
  auto feed = std::make_unique<FolderFeed>(std::move(dir), std::move(prefix), std::move(fd));
  if (!feed->resume()) {  // proves inotify works here
    ec = last_error();
    return nullptr;
  }
  return feed;
}

}  // namespace kagi::store::detail
