#include <kagi/store/durable_scope.hpp>

#include <utility>

#include <kagi/store/detail/group_sync.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store {

namespace {
thread_local DurableScope* current_scope = nullptr;
}  // namespace

struct DurableScope::Pending {
  detail::GroupSync* sync;
  detail::SyncNeed need;
};

DurableScope::DurableScope() : outer_(current_scope) { current_scope = this; }

DurableScope::~DurableScope() {
  if (Status s = wait(); !s.ok()) util::log_error("store: " + s.message());
  current_scope = outer_;
}

bool DurableScope::empty() const { return needs_.empty(); }

DurableScope* DurableScope::current() { return current_scope; }

void DurableScope::add(detail::GroupSync& sync, detail::SyncNeed need) {
  needs_.push_back(Pending{&sync, std::move(need)});
}

Status DurableScope::wait() {
  std::vector<Pending> pending;
  pending.swap(needs_);
  Status first;
  // Almost always one store; needs of one store go to its group in one call.
  while (!pending.empty()) {
    detail::GroupSync* sync = pending.front().sync;
    std::vector<detail::SyncNeed> batch;
    std::vector<Pending> rest;
    for (Pending& p : pending) {
      if (p.sync == sync) {
        batch.push_back(std::move(p.need));
      } else {
        rest.push_back(std::move(p));
      }
    }
    pending.swap(rest);
    if (Status s = sync->sync(std::move(batch)); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status wait_durable() {
  DurableScope* scope = DurableScope::current();
  return scope ? scope->wait() : Status{};
}

}  // namespace kagi::store
