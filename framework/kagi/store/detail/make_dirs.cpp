#include <kagi/store/detail/make_dirs.hpp>

#include <sys/stat.h>

#include <cerrno>

namespace kagi::store::detail {

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

}  // namespace kagi::store::detail
