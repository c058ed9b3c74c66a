#include <kagi/lock/options.hpp>

#include <kagi/util/process.hpp>

namespace kagi::lock {

std::string dir_host_id(const LockOptions& options) {
  if (!options.dir_host_id.empty()) return options.dir_host_id;
  std::string host = util::host_name();
  return host.empty() ? std::string("localhost") : host;
}

std::string host_state_dir(const LockOptions& options) {
  if (options.backend != "dir") return options.dir;
  return options.dir + "/hosts/" + dir_host_id(options);
}

}  // namespace kagi::lock
