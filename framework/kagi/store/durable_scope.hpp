// store/durable_scope.hpp — "answer only once it is durable", for a whole request.
//
// With data.fsync = "always", a log append under a DurableScope writes its record without
// flushing it, and the scope remembers what must be flushed. The request then releases its
// locks, and wait() makes everything durable at once, sharing each fsync with every other
// request waiting at the same moment (group commit, store/detail/group_sync.hpp). The lock is
// therefore never held across a flush, and the answer still goes out only after the record
// is durable.
//
// Reads follow the same rule: a read that returns bytes this process does not yet know to be
// durable (a record another request appended a moment ago) adds them to the scope, so no
// answer ever shows a record that a power cut could still take back.
//
// The App opens one scope per request around the handler and waits after the locks are gone:
//
//   store::DurableScope durable;           // this thread's appends and reads now defer
//   response = handler(request, ctx);      // lock, read, append, unlock
//   locks->end_request();
//   if (!durable.wait().ok()) response = 500;   // flushed: now it may be told
//
// (The App uses wait_async(): the worker thread goes back to serving while the answer waits,
// so that more requests share each flush.)
//
// A handler that must act on its writes before returning (the chat wakes its waiters with the
// message it stored) calls store::wait_durable() after unlocking. Without a scope (tools, tests,
// background threads) an append or read flushes before it returns, as it always did.
#pragma once

#include <functional>
#include <vector>

#include <kagi/store/status.hpp>

namespace kagi::store {

namespace detail {
class GroupSync;
struct SyncNeed;
}  // namespace detail

class DurableScope {
 public:
  DurableScope();   // becomes this thread's scope (scopes nest: the inner one is used)
  ~DurableScope();  // waits for what is left (errors only logged: call wait() to see them)
  DurableScope(const DurableScope&) = delete;
  DurableScope& operator=(const DurableScope&) = delete;

  // Makes everything added so far durable; the first failure, if any. Leaves the scope empty.
  Status wait();
  // The same without blocking this thread: `done` runs once all of it is durable (with the
  // first failure, if any), on the store's flush thread, or here at once when nothing needs a
  // flush. Leaves the scope empty. The App answers requests this way.
  void wait_async(std::function<void(Status)> done);
  bool empty() const;

  // The calling thread's innermost scope, or null.
  static DurableScope* current();

  // For DataDir: `need` must be durable before this scope's request is answered.
  void add(detail::GroupSync& sync, detail::SyncNeed need);
  // See after_durable().
  void then(std::function<void()> action);

 private:
  struct Pending;
  std::vector<Pending> needs_;
  std::vector<std::function<void()>> then_;  // run once needs_ are durable
  DurableScope* outer_;
};

// Makes the current scope's writes and reads durable now (no scope: nothing to do).
Status wait_durable();

// Runs `then` once what the current scope holds is durable: at once when it holds nothing (or
// there is no scope), else after its flush, on the thread that completes it; never if the
// flush fails. For what a handler does with its own write after answering (the chat wakes its
// waiters with the message it stored) without holding its worker thread for the flush.
void after_durable(std::function<void()> then);

}  // namespace kagi::store
