// lock/detail/log.hpp — where the lock layer reports events (order violations, leaks, timeouts,
// backend failures): one warning line each, on stderr through util::log for now.
#pragma once

#include <string_view>

namespace kagi::lock {

void log_event(std::string_view message);

}  // namespace kagi::lock
