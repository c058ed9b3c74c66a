#include <kagi/store/durable_scope.hpp>

#include <algorithm>
#include <atomic>
#include <future>
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
  // Nothing to flush (data.fsync = never, a request that wrote nothing, or the App's
  // wait_async already took it all): no promise to make, as every request's scope ends here.
  if (needs_.empty() && then_.empty()) return {};
  std::promise<Status> answer;
  std::future<Status> answered = answer.get_future();
  wait_async([&answer](Status s) { answer.set_value(std::move(s)); });
  return answered.get();
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
