#include <kagi/lock/guard.hpp>

#include <kagi/lock/detail/held_lock.hpp>

namespace kagi::lock {
namespace detail {
namespace {

// A few released HeldLocks per thread, ready for the next acquire, which sets every field
// (their name strings keep their capacity). Freed when the thread ends.
struct SpareHeldLocks {
  static constexpr size_t kMax = 8;
  HeldLock* items[kMax];
  size_t count = 0;
  bool closed = false;  // the thread is exiting: guards destroyed after this free directly
  ~SpareHeldLocks() {
    while (count > 0) delete items[--count];
    closed = true;
  }
};
thread_local SpareHeldLocks t_spares;

}  // namespace

void HeldLockRecycle::operator()(HeldLock* held) const noexcept {
  if (t_spares.closed || t_spares.count == SpareHeldLocks::kMax) {
    delete held;
    return;
  }
  t_spares.items[t_spares.count++] = held;
}

HeldLockPtr make_held_lock() {
  if (!t_spares.closed && t_spares.count > 0) return HeldLockPtr(t_spares.items[--t_spares.count]);
  return HeldLockPtr(new HeldLock);
}

}  // namespace detail

Guard::Guard(detail::HeldLockPtr held) : held_(std::move(held)) {}

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

bool Guard::held() const {
  return held_ && held_->owner != nullptr && !held_->revoked.load(std::memory_order_acquire);
}

std::error_code with_lock_connection(const Guard& guard, const ConnectionWork& work) {
  if (!guard.held_ || !guard.held_->owner) return make_error_code(Errc::kReleased);
  return guard.held_->owner->with_connection(*guard.held_, work);
}

std::error_code Guard::verify() const {
  if (!held_ || !held_->owner) return make_error_code(Errc::kReleased);
  return held_->owner->verify(*held_);
}

void Guard::release() {
  if (held_ && held_->owner) held_->owner->release(*held_);
  held_.reset();
}

}  // namespace kagi::lock
