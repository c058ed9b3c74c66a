#include <kagi/lock/detail/log.hpp>

#include <string>

#include <kagi/util/log.hpp>

namespace kagi::lock {

void log_event(std::string_view message) { util::log_warn("lock: " + std::string(message)); }

}  // namespace kagi::lock
