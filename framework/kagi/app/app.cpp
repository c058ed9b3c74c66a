#include <kagi/app/app.hpp>

#include <atomic>
#include <cstdio>
#include <optional>

#include <kagi/app/csrf.hpp>
#include <kagi/app/http_error.hpp>
#include <kagi/app/lock_conf.hpp>
#include <kagi/app/pipeline.hpp>
#include <kagi/app/session.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_domain.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/offline/lock_manager.hpp>
#include <kagi/offline/session_store.hpp>
#include <kagi/offline/state_store.hpp>
#include <kagi/pg/options.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/durable_scope.hpp>
#include <kagi/store/lock_domain_claim.hpp>
#include <kagi/store/pg_data_store.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/random.hpp>
#include <kagi/view/page_cache.hpp>
#include <kagi/view/views.hpp>

namespace kagi {

// A parked request: everything needed to finish it later, from any thread.
struct Deferred::State {
  const pipeline::Settings* settings = nullptr;
  std::shared_ptr<Responder> out;
  pipeline::FinishInfo info;
  std::atomic<bool> done{false};
};

bool Deferred::complete(Response response) const {
  if (!state_ || state_->done.exchange(true)) return false;
  pipeline::finish(response, state_->info, *state_->settings);
  state_->out->send(std::move(response));
  return true;
}

bool Deferred::completed() const { return state_ && state_->done.load(); }
bool Deferred::client_gone() const { return state_ && state_->out->client_gone(); }

namespace {

// A lock option the service refuses (a postgres backend without a DSN, say) is a
// configuration error: said at start, exit code 2.
std::unique_ptr<lock::LockService> make_lock_service(const Config& conf) {
  try {
    return lock::LockService::create(lock_options(conf));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

// Opens data.dir and claims it for this process's lock domain: a folder written under
// another domain is refused at start (store/lock_domain_claim.hpp).
std::unique_ptr<store::DataDir> open_data_dir(const Config& conf, const lock::LockOptions& locks,
                                              store::FileSystem& fs) {
  store::DataOptions options;
  options.dir = conf.get_string("data.dir");
  options.fsync = conf.get_string("data.fsync") == "always";
  options.group_readable = conf.get_bool("data.group_readable");
  options.syncfs_min_files = static_cast<size_t>(conf.get_int("data.syncfs_min_files"));
  options.syncfs_max_dirty_kb = static_cast<uint64_t>(conf.get_int("data.syncfs_max_dirty_kb"));
  options.journal = conf.get_bool("data.journal");
  options.journal_kb = static_cast<uint64_t>(conf.get_int("data.journal_kb"));
  std::error_code ec;
  auto dir = store::DataDir::open(options, fs, ec);
  if (!dir) {
    throw ConfigError("cannot open data.dir '" + options.dir + "': " + ec.message());
  }
  const store::Status claimed = store::claim_lock_domain(dir->dir(), lock::lock_domain(locks),
                                                         conf.get_bool("data.adopt_lock_domain"));
  if (!claimed.ok()) throw ConfigError(claimed.message());
  return dir;
}

// data.backend = "postgres": the tables in the database of data.postgres.dsn (default: the
// locks'), claimed for this process's lock domain. With postgres locks on that same database,
// every call runs on the connection holding its lock (store/pg_data_store.hpp).
std::unique_ptr<store::DataStore> open_pg_data(const Config& conf, const lock::LockOptions& locks) {
  store::PgDataOptions options;
  options.connect = locks.postgres;  // keepalives and application_name as the locks'
  const std::string dsn = conf.get_string("data.postgres.dsn");
  options.connect.dsn = dsn.empty() ? locks.postgres.dsn : dsn;
  if (options.connect.dsn.empty()) {
    throw ConfigError(
        "data.backend = \"postgres\" needs a database: set data.postgres.dsn (or "
        "locks.postgres.dsn, which it defaults to)");
  }
  std::string why;
  if (pg::check_dsn(options.connect.dsn, &why)) {
    throw ConfigError("data.postgres.dsn does not parse: " + why);
  }
  options.pool = static_cast<size_t>(conf.get_int("data.postgres.pool"));
  options.fsync = conf.get_string("data.fsync") == "always";
  lock::LockOptions same = locks;
  same.backend = "postgres";
  same.postgres.dsn = options.connect.dsn;
  options.on_lock_connection =
      locks.backend == "postgres" && lock::lock_domain(same) == lock::lock_domain(locks);
  options.lock_domain = lock::lock_domain(locks);
  options.adopt_lock_domain = conf.get_bool("data.adopt_lock_domain");
  std::error_code ec;
  auto data = store::PgDataStore::open(options, ec, &why);
  if (!data) throw ConfigError("cannot open the data in PostgreSQL (data.postgres.dsn): " + why);
  return data;
}

std::unique_ptr<store::DataStore> open_data_store(const Config& conf,
                                                  const lock::LockOptions& locks,
                                                  store::FileSystem& fs) {
  if (conf.get_string("data.backend") != "postgres") return open_data_dir(conf, locks, fs);
  // data.dir still holds this host's secret.key (security.secret_file's default): made here
  // with the data's folder mode, as with the files backend.
  std::error_code ec;
  if (!store::DataDir::open({.dir = conf.get_string("data.dir"),
                             .group_readable = conf.get_bool("data.group_readable")},
                            ec)) {
    throw ConfigError("cannot open data.dir '" + conf.get_string("data.dir") +
                      "': " + ec.message());
  }
  return open_pg_data(conf, locks);
}

// Where sessions and offline locks live: beside the data.
std::shared_ptr<offline::StateStore> open_state(const Config& conf) {
  std::string why;
  std::shared_ptr<offline::StateStore> state =
      offline::open_state_store(offline_state_options(conf), &why);
  if (!state) throw ConfigError("cannot open the sessions and offline locks: " + why);
  return state;
}

// Request ids: unique per host without a system call per request (a random per-process
// prefix and a counter).
std::string next_request_id() {
  static const std::string prefix = util::random_hex(4);
  static std::atomic<uint64_t> counter{0};
  char buf[24];
  std::snprintf(buf, sizeof buf, "%08llx",
                static_cast<unsigned long long>(counter.fetch_add(1, std::memory_order_relaxed)));
  return prefix + buf;
}

// What finishing the response to `request` needs, taken when it arrives.
pipeline::FinishInfo finish_info(const http::Request& request, const pipeline::Settings& settings) {
  pipeline::FinishInfo info;
  info.started = std::chrono::steady_clock::now();
  info.request_id = next_request_id();
  info.method = request.method;
  info.target = request.target;
  info.client_address = request.client_address;
  info.secure = request.https || settings.behind_https;
  return info;
}

// The server secret, from security.secret_file or "secret.key" in data.dir (made there on the
// first start). A start that cannot have it fails like a bad config, saying why.
util::Secret load_secret(const Config& conf) {
  std::string path = conf.get_string("security.secret_file");
  if (path.empty()) path = conf.get_string("data.dir") + "/secret.key";
  try {
    return util::Secret::load_or_create(path);
  } catch (const std::runtime_error& e) {
    throw ConfigError(std::string("security.secret_file: ") + e.what());
  }
}

util::LogLevel log_level(const std::string& name) {
  if (name == "debug") return util::LogLevel::kDebug;
  if (name == "warn") return util::LogLevel::kWarn;
  if (name == "error") return util::LogLevel::kError;
  return util::LogLevel::kInfo;
}

}  // namespace

App::App(Config conf) : App(std::move(conf), store::real_fs()) {}

App::App(Config conf, store::FileSystem& data_fs)
    : conf_(std::move(conf)),
      limits_(Limits::from(conf_)),
      settings_(pipeline::Settings::from(conf_)),
      retry_after_s_(static_cast<int>(conf_.get_int("locks.retry_after_s"))),
      locks_(make_lock_service(conf_)),
      data_(open_data_store(conf_, locks_->options(), data_fs)),
      state_(open_state(conf_)),
      sessions_(std::make_unique<offline::SessionStore>(state_, session_options(conf_))),
      offline_locks_(std::make_unique<offline::LockManager>(state_, offline_lock_options(conf_))),
      views_(std::make_unique<view::Views>(conf_.get_string("templates.dir"),
                                           conf_.get_string("templates.fallback_dir"))),
      secret_(load_secret(conf_)),
      csrf_(secret_) {
  settings_.requests = &requests_;
  util::set_log_level(log_level(conf_.get_string("log.level")));
}

App::~App() { data_->drain(); }

http::Response App::error_page(int status, std::string_view message) const {
  view::Dict page;
  page.set("STATUS", status);
  page.set("REASON", http::reason_phrase(status));
  page.set("MESSAGE", message);
  std::string specific = "errors/" + std::to_string(status) + ".html";
  std::string body;
  try {
    body = views_->render(views_->has(specific) ? specific : "errors/error.html", page);
  } catch (const view::ViewError& e) {
    // A broken template must not turn an error page into a crash.
    util::log_error(std::string("error page: ") + e.what());
    body = std::to_string(status) + " " + http::reason_phrase(status) + "\n";
    return http::Response::text(std::move(body), status);
  }
  return http::Response::html(std::move(body), status);
}

void App::reject(const http::Request& request, int status, std::string_view message,
                 const std::shared_ptr<Responder>& out) const {
  pipeline::FinishInfo info = finish_info(request, settings_);
  http::Response response = error_page(status, message);
  pipeline::finish(response, info, settings_);
  out->send(std::move(response));
}

void App::on_shutdown(std::function<void()> hook) {
  util::MutexLock lock(shutdown_mu_);
  shutdown_hooks_.push_back(std::move(hook));
}

void App::shutdown() {
  std::vector<std::function<void()>> hooks;
  {
    util::MutexLock lock(shutdown_mu_);
    hooks.swap(shutdown_hooks_);  // once: later calls find nothing to run
  }
  for (auto& hook : hooks) hook();
  // Answers waiting for a group flush go out before the front ends stop.
  data_->drain();
}

void App::handle(http::Request request, std::shared_ptr<Responder> out) {
  pipeline::FinishInfo info = finish_info(request, settings_);

  auto send = [&](http::Response response) {
    pipeline::finish(response, info, settings_);
    out->send(std::move(response));
  };

  std::string error;
  if (int status = pipeline::parse_head(request, limits_, error)) {
    return send(error_page(status, error));
  }
  Router::Match match = router_.match(request.method, request.path);
  if (match.kind == Router::Match::kNotFound) {
    return send(error_page(404, "There is nothing at " + request.path + "."));
  }
  if (match.kind == Router::Match::kMethodNotAllowed) {
    http::Response response = error_page(405, request.method + " is not allowed here.");
    response.headers.set("Allow", match.allow);
    return send(std::move(response));
  }
  info.route = *match.route;
  // The client's signed token: checked here for an unsafe method; for a safe one, looked up (or
  // issued, with its cookie) only if the handler asks for it (Context::csrf_token).
  std::optional<std::string> token;
  if (csrf::is_unsafe_method(request.method)) {
    if (int status = pipeline::parse_body(request, limits_, error)) {
      return send(error_page(status, error));
    }
    const std::string_view cookie = csrf_.cookie_token(request, info.secure);
    if (!csrf_.submitted(request, cookie)) {
      // A missing cookie, or one this server did not sign (planted by someone else), is
      // replaced here, so that the reload the page asks for works.
      if (cookie.empty()) info.new_csrf_token = csrf_.issue();
      return send(error_page(403,
                             "The form's security token is missing or out of date. Reload the "
                             "page and submit it again."));
    }
    token.emplace(cookie);
  }
  request.path_params = std::move(match.params);

  auto locks = locks_->context(lock::HolderInfo{.request_id = info.request_id,
                                                .method = request.method,
                                                .path = request.path,
                                                .client_address = request.client_address});
  Session session(*sessions_, request);
  Context ctx(*this, *locks, session, info.request_id, std::move(token));
  ctx.request_ = &request;
  ctx.info_ = &info;
  ctx.out_ = &out;
  http::Response response;
  // Appends and reads defer their flushes to here (group commit): see store/durable_scope.hpp.
  store::DurableScope durable;
  try {
    response = (*match.handler)(request, ctx);
  } catch (const lock::LockUnavailable& unavailable) {
    // Logged with its reason where it happened (lock layer); the visitor gets the busy page.
    response = error_page(503,
                          "This page is unavailable for a moment: its lock service cannot be "
                          "reached. Please try again shortly.");
    response.headers.set("Retry-After", std::to_string(retry_after_s_));
  } catch (const lock::LockBusy& busy) {
    response = error_page(503, "This page is busy right now (" + std::string(busy.name()) +
                                   "). Please try again in a moment.");
    response.headers.set("Retry-After", std::to_string(retry_after_s_));
  } catch (const store::StoreError& e) {
    util::log_error("request " + info.request_id + " " + request.method + " " + request.path +
                    " failed: " + e.what());
    if (e.code() == store::Errc::kUnavailable) {
      // The data server is down or out of connections: like an unreachable lock service.
      response = error_page(503,
                            "This page is unavailable for a moment: its data service cannot be "
                            "reached. Please try again shortly.");
      response.headers.set("Retry-After", std::to_string(retry_after_s_));
    } else {
      response = error_page(500, "Something went wrong on our side. It has been logged.");
    }
  } catch (const HttpError& e) {
    response = error_page(e.status(), e.what());
    for (const auto& [name, value] : e.headers().items()) response.headers.set(name, value);
  } catch (const std::exception& e) {
    util::log_error("request " + info.request_id + " " + request.method + " " + request.path +
                    " failed: " + e.what());
    response = error_page(500, "Something went wrong on our side. It has been logged.");
  }
  // Whatever the handler still holds is released here (and reported as a leak), before the
  // response goes out: a parked request holds no lock.
  locks->end_request();
  if (ctx.deferred_) {
    // Parked, or answered through Deferred::complete(): what it read is made durable before
    // this thread moves on (a parked poll read nothing new, so this is almost always free).
    if (store::Status flushed = durable.wait(); !flushed.ok()) {
      util::log_error("request " + info.request_id + " " + request.method + " " + request.path +
                      " failed: " + flushed.message());
    }
    return;
  }
  if (auto cookie = session.cookie()) response.cookies.push_back(std::move(*cookie));
  if (durable.empty()) return send(std::move(response));
  // Group commit: only now, with no lock held, are the request's records flushed, with those of
  // every request waiting at this moment; the answer goes out once they are durable, from the
  // store's flush thread, while this thread serves the next request.
  durable.wait_async([this, info = std::move(info), out, response = std::move(response),
                      what = request.method + " " + request.path](store::Status flushed) mutable {
    if (!flushed.ok()) {
      util::log_error("request " + info.request_id + " " + what + " failed: " + flushed.message());
      response = error_page(500, "Your change could not be saved safely. It has been logged.");
    }
    pipeline::finish(response, info, settings_);
    out->send(std::move(response));
  });
}

Context::Context(App& app, lock::LockContext& lock_context, Session& request_session,
                 std::string request_id, std::optional<std::string> csrf_token)
    : locks(lock_context),
      data(app.data()),
      session(request_session),
      offline(app.offline_locks()),
      views(app.views()),
      conf(app.conf()),
      app_(app),
      request_id_(std::move(request_id)),
      csrf_token_(std::move(csrf_token)) {}

const std::string& Context::csrf_token() const {
  if (!csrf_token_) {
    const bool secure = info_ != nullptr && info_->secure;
    csrf_token_ = request_ != nullptr ? std::string(app_.csrf_.cookie_token(*request_, secure))
                                      : std::string();
    // A missing cookie, or one this server did not sign (planted by someone else), gets a
    // fresh token, set as the cookie by this request's answer.
    if (csrf_token_->empty()) {
      csrf_token_ = app_.csrf_.issue();
      if (info_ != nullptr) info_->new_csrf_token = *csrf_token_;
    }
  }
  return *csrf_token_;
}

bool Context::csrf_proven(const http::Request& request) const {
  return app_.csrf_.verify(request, info_ != nullptr && info_->secure);
}

Response Context::render(std::string_view name, view::Dict& dict, int status) const {
  dict.set("CSRF", csrf_token());
  return Response::html(views.render(name, dict), status);
}

Response Context::render_cached(view::PageCache& cache, const std::string& key, uint64_t version,
                                std::string_view name,
                                const std::function<void(view::Dict&)>& fill) const {
  const std::string& token = csrf_token();
  if (!view::pastable_token(token)) {  // never for kagi's hex tokens: kept correct anyway
    view::Dict dict;
    fill(dict);
    return render(name, dict);
  }
  std::shared_ptr<const view::CachedPage> page = cache.find(key, version);
  if (!page) {
    view::Dict dict;
    fill(dict);
    dict.set("CSRF", cache.marker());
    page = cache.store(key, version, views.render(name, dict));
  }
  return Response::html(page->with_token(token));
}

Deferred Context::defer() {
  if (!deferred_) {
    // The answer may be rendered after this point, and its cookie is set from this copy.
    csrf_token();
    // Filled completely here: another thread may complete it before the handler returns.
    deferred_ = std::make_shared<Deferred::State>();
    deferred_->settings = &app_.settings_;
    deferred_->out = *out_;
    deferred_->info = *info_;
  }
  return Deferred(deferred_);
}

}  // namespace kagi
