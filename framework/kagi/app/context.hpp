// app/context.hpp — what a handler gets besides the request: its lock context, the data
// directory, its session and the offline locks, templates, config, and its CSRF token; and
// the way to park a request.
//
//   Response post(Request& req, Context& ctx) {
//     auto board = ctx.locks.exclusive("bbs/board/" + id);     // lock first,
//     auto text = ctx.data.read(board, "bbs/" + id + ".txt").value();  // then read,
//     ctx.data.commit(board, "bbs/" + id + ".txt", updated).check();   // then write;
//     return Response::redirect("/bbs/" + id + "/");
//   }                                                          // released here
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/config/config.hpp>
#include <kagi/http/request.hpp>
#include <kagi/http/response.hpp>

namespace kagi {

namespace lock {
class LockContext;
}
namespace store {
class DataStore;
}
namespace offline {
class LockManager;
}
namespace view {
class Views;
class Dict;
class PageCache;
}  // namespace view

class Responder;
class App;
class Session;
namespace pipeline {
struct FinishInfo;
}

// App-facing names.
using http::Request;
using http::Response;

// A parked request's handle: complete() sends its response, once, from any thread.
// Cheap to copy; all copies refer to the same request.
class Deferred {
 public:
  Deferred() = default;
  // Sends `response` through the pipeline's finishing steps (security headers, access
  // log). Later calls are ignored. Returns false if it was already completed.
  bool complete(Response response) const;
  bool completed() const;
  bool client_gone() const;
  explicit operator bool() const { return state_ != nullptr; }

  struct State;  // defined by the pipeline

 private:
  friend class App;
  friend class Context;
  explicit Deferred(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

class Context {
 public:
  Context(App& app, lock::LockContext& locks, Session& session, std::string request_id,
          std::optional<std::string> csrf_token);

  lock::LockContext& locks;
  store::DataStore& data;
  // The browser's server-side session (app/session.hpp): the owner of offline locks.
  Session& session;
  // Locks that span several requests, held by sessions (offline/lock_manager.hpp).
  offline::LockManager& offline;
  view::Views& views;
  const Config& conf;

  const std::string& request_id() const { return request_id_; }
  // The client's CSRF token: render it into forms as <input type=hidden name=_csrf> (render()
  // does, as {{CSRF}}). Made on first use: a client without a valid one gets a fresh token and
  // its cookie with this answer. An answer that never asks (JSON, a redirect, a hello) sets no
  // cookie, and costs no signature check.
  const std::string& csrf_token() const;
  // True when the request submits (field _csrf or header X-CSRF-Token) this client's signed
  // token: proof that it came from one of the site's own pages. The pipeline checks it on
  // every unsafe method; a GET whose side effect must not be forgeable (the chat's presence)
  // asks here (the same check as the pipeline's: csrf::Tokens::verify).
  bool csrf_proven(const http::Request& request) const;

  // Renders templates/<name> with `dict` (auto-escaped) into an HTML response. The CSRF
  // token is available in every template as {{CSRF}}.
  Response render(std::string_view name, view::Dict& dict, int status = 200) const;

  // render() for a page that shows nothing but shared state at `version` (e.g. a board's
  // store::NumberedLog::version, read under its lock) and the CSRF token: the first request
  // renders it with the values `fill` sets, and later ones at the same version get the copy
  // `cache` kept, with their own token pasted in (view/page_cache.hpp). `key` names the page
  // within the cache (e.g. board and page number). Call it while holding the lock that keeps
  // the state at `version`.
  Response render_cached(view::PageCache& cache, const std::string& key, uint64_t version,
                         std::string_view name, const std::function<void(view::Dict&)>& fill) const;

  // Parks the request: whatever the handler returns is ignored and the request stays open
  // until the returned Deferred is completed. The lock context is still released when the
  // handler returns: a parked request holds no lock and no thread.
  Deferred defer();
  bool deferred() const { return deferred_ != nullptr; }

 private:
  friend class App;
  App& app_;
  const http::Request* request_ = nullptr;           // set by App::handle
  pipeline::FinishInfo* info_ = nullptr;             // set by App::handle
  const std::shared_ptr<Responder>* out_ = nullptr;  // set by App::handle
  std::string request_id_;
  mutable std::optional<std::string> csrf_token_;  // none: not asked for yet
  std::shared_ptr<Deferred::State> deferred_;
};

}  // namespace kagi
