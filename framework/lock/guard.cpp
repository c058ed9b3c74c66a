#include "lock/guard.hpp"

#include "lock/detail/held_lock.hpp"
#include "lock/lock_context.hpp"

namespace kagi::lock {

Guard::Guard() = default;

Guard::Guard(std::unique_ptr<detail::HeldLock> held) : held_(std::move(held)) {}

Guard::Guard(Guard&& other) noexcept = default;

Guard& Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    release();
    held_ = std::move(other.held_);
  }
  return *this;
}

Guard::~Guard() { release(); }

const std::string& Guard::name() const {
  static const std::string empty;
  return held_ ? held_->name : empty;
}

Mode Guard::mode() const { return held_ ? held_->mode : Mode::kShared; }

uint64_t Guard::epoch() const { return held_ ? held_->epoch : 0; }

bool Guard::held() const { return held_ && held_->ctx != nullptr; }

std::error_code Guard::verify() const {
  if (!held()) return make_error_code(Errc::kReleased);
  return held_->ctx->verify(*held_);
}

void Guard::release() {
  if (held_ && held_->ctx) held_->ctx->release(*held_);
  held_.reset();
}

}  // namespace kagi::lock
