// app/app.hpp — the application both front ends feed: config, routes, the request pipeline.
//
//   kagi::App app(kagi::Config::load(file, overrides));
//   app.router().get("/hello", [](kagi::Request&, kagi::Context&) {
//     return kagi::Response::text("hello\n");
//   });
//   kagi::HttpServer(app, {...}).run();   // or kagi::FcgiServer
//
// handle() runs the pipeline for one request: parse (limits → 400/413), route (404/405),
// request id, CSRF check on unsafe methods (403), the handler with a fresh lock context,
// release of leftover locks (counted as leaks), error pages, security headers, access log.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <kagi/app/context.hpp>
#include <kagi/app/csrf.hpp>
#include <kagi/app/request_stats.hpp>
#include <kagi/app/responder.hpp>
#include <kagi/app/router.hpp>
#include <kagi/app/settings.hpp>
#include <kagi/config/config.hpp>
#include <kagi/http/request.hpp>
#include <kagi/http/response.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi {

namespace lock {
class LockService;
}
namespace store {
class DataStore;
class FileSystem;
}  // namespace store
namespace offline {
class LockManager;
class SessionStore;
class StateStore;
}  // namespace offline
namespace view {
class Views;
}

class App {
 public:
  explicit App(Config conf);
  // For tests: data.dir's files go through `data_fs` (a fault-injecting or slow FileSystem,
  // store/fault_fs.hpp), which must outlive the App. With data.backend = "files" only.
  App(Config conf, store::FileSystem& data_fs);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  Router& router() { return router_; }
  const Config& conf() const { return conf_; }
  const Limits& limits() const { return limits_; }
  lock::LockService& locks() { return *locks_; }
  store::DataStore& data() { return *data_; }
  // Sessions and offline locks (offline/state_store.hpp: SQLite in data.dir, or PostgreSQL
  // tables with data.backend = "postgres").
  offline::SessionStore& sessions() { return *sessions_; }
  offline::LockManager& offline_locks() { return *offline_locks_; }
  view::Views& views() { return *views_; }
  // The server secret (security.secret_file): the key of every tag an app signs or blinds.
  const util::Secret& secret() const { return secret_; }
  // Requests finished by this process, per route and status (for /metrics).
  const RequestStats& requests() const { return requests_; }

  // Runs one request through the pipeline; the response goes out through `out` (see
  // responder.hpp). Thread-safe: front ends call it from all their worker threads.
  void handle(http::Request request, std::shared_ptr<Responder> out);

  // A rendered error page (templates/errors/<status>.html) with `message` shown on it.
  http::Response error_page(int status, std::string_view message) const;

  // For errors a front end detects itself (413 on an oversized body, 431): the error page
  // with the same finishing steps as any response (security headers, access log), sent
  // through `out`. `request` needs method, target and client_address.
  void reject(const http::Request& request, int status, std::string_view message,
              const std::shared_ptr<Responder>& out) const;

  // Shutdown hooks: apps register what must happen when the process stops (the chat answers
  // its parked long-polls). shutdown() runs them once, in registration order; kagi-demo calls
  // it on SIGTERM before stopping the front ends, so parked requests do not hold up the stop.
  void on_shutdown(std::function<void()> hook) KAGI_EXCLUDES(shutdown_mu_);
  void shutdown() KAGI_EXCLUDES(shutdown_mu_);

 private:
  friend class Context;     // Context::defer() reads settings_, csrf_proven() csrf_
  friend class TestClient;  // a client no page gave a CSRF token gets one from csrf_, named
                            // after settings_.behind_https
  util::Mutex shutdown_mu_;
  std::vector<std::function<void()>> shutdown_hooks_ KAGI_GUARDED_BY(shutdown_mu_);
  Config conf_;
  Limits limits_;
  RequestStats requests_;
  pipeline::Settings settings_;
  int retry_after_s_;
  std::unique_ptr<lock::LockService> locks_;
  std::unique_ptr<store::DataStore> data_;
  std::shared_ptr<offline::StateStore> state_;  // after data_: in its folder or database
  std::unique_ptr<offline::SessionStore> sessions_;
  std::unique_ptr<offline::LockManager> offline_locks_;
  std::unique_ptr<view::Views> views_;
  util::Secret secret_;  // after data_: its default file lives in data.dir
  csrf::Tokens csrf_;
  // Last, so it is destroyed first: route handlers may own threads (the chat's watcher) that
  // use the lock service and the data directory until they are gone.
  Router router_;
};

}  // namespace kagi
