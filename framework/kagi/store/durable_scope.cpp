#include <kagi/store/durable_scope.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
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

void DurableScope::then(std::function<void()> action) {
  if (needs_.empty()) return action();
  then_.push_back(std::move(action));
}

Status DurableScope::wait() {
  std::vector<Pending> pending;
  pending.swap(needs_);
  std::vector<std::function<void()>> then;
  then.swap(then_);
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
  if (first.ok()) {
    for (auto& action : then) action();
  }
  return first;
}

void DurableScope::wait_async(std::function<void(Status)> done) {
  std::vector<Pending> pending;
  pending.swap(needs_);
  if (pending.empty()) return done(Status{});
  if (!then_.empty()) {
    done = [then = std::move(then_), done = std::move(done)](Status s) {
      if (s.ok()) {
        for (const auto& action : then) action();
      }
      done(s);
    };
    then_.clear();
  }
  // The needs per store; `done` runs when the last store has answered, with the first failure.
  std::vector<std::pair<detail::GroupSync*, std::vector<detail::SyncNeed>>> groups;
  for (Pending& p : pending) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == p.sync; });
    if (it == groups.end()) {
      groups.emplace_back(p.sync, std::vector<detail::SyncNeed>());
      it = groups.end() - 1;
    }
    it->second.push_back(std::move(p.need));
  }
  struct Join {
    std::atomic<size_t> left;
    std::mutex mu;
    Status first;
    std::function<void(Status)> done;
  };
  auto join = std::make_shared<Join>();
  join->left = groups.size();
  join->done = std::move(done);
  for (auto& [sync, needs] : groups) {
    sync->submit(std::move(needs), [join](Status s) {
      if (!s.ok()) {
        std::lock_guard lock(join->mu);
        if (join->first.ok()) join->first = s;
      }
      if (join->left.fetch_sub(1) == 1) {
        Status first;
        {
          std::lock_guard lock(join->mu);
          first = join->first;
        }
        join->done(first);
      }
    });
  }
}

Status wait_durable() {
  DurableScope* scope = DurableScope::current();
  return scope ? scope->wait() : Status{};
}

void after_durable(std::function<void()> then) {
  DurableScope* scope = DurableScope::current();
  if (scope == nullptr) return then();
  scope->then(std::move(then));
}

}  // namespace kagi::store
