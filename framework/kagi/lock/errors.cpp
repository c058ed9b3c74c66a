#include <kagi/lock/errors.hpp>

namespace kagi::lock {
namespace {

std::string printable(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (name.size() > 80) out += "...";
  return out;
}

}  // namespace

LockBusy::LockBusy(std::string name, std::chrono::milliseconds waited)
    : std::runtime_error("lock '" + name + "' is busy: gave up after " +
                         std::to_string(waited.count()) + " ms"),
      name_(std::move(name)),
      waited_(waited) {}

LockNameError::LockNameError(std::string name, const std::string& reason)
    : std::invalid_argument("invalid lock name '" + printable(name) + "': " + reason +
                            " (use segments of [a-z0-9_.-] separated by '/')"),
      name_(std::move(name)) {}

}  // namespace kagi::lock
