// lock/holder_info.hpp — who a lock context acts for: the request behind its locks.
//
// Shown on the admin page and in the registry, and named in every leak, timeout, order and
// revocation report, so a log line leads back to the route that caused it.
#pragma once

#include <string>

namespace kagi::lock {

struct HolderInfo {
  std::string request_id, method, path, client_address;
};

}  // namespace kagi::lock
