#include "fcgi/fcgi_server.hpp"

#include <fcgiapp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "app/app.hpp"
#include "fcgi/cgi_params.hpp"
#include "fcgi/listen_socket.hpp"
#include "util/log.hpp"

namespace kagi {
namespace fcgi {
namespace {

using Clock = std::chrono::steady_clock;

// How long a worker waits at most between looks at the shared state, and how long the
// process stops accepting after it ran out of file descriptors.
constexpr auto kPollTick = std::chrono::milliseconds(500);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

// One connection from the web server with the libfcgi request that reads and writes it.
// The FCGX_Request lives as long as the connection because libfcgi keeps the connection
// state (ipcFd, keepConnection) in it between requests.
class Conn {
 public:
  Conn(int fd, uint64_t id) : id_(id) {
    FCGX_InitRequest(&req_, -1, 0);
    // With ipcFd set, FCGX_Accept_r reads the next request from this connection instead of
    // accepting; keepConnection stops its leading FCGX_Finish_r from closing it. The listen
    // socket -1 makes the accept it falls back to when the peer closed fail at once
    // (EBADF) instead of blocking the worker.
    req_.ipcFd = fd;
    req_.keepConnection = 1;
  }
  ~Conn() {
    FCGX_Free(&req_, 0);
    if (req_.ipcFd >= 0) ::close(req_.ipcFd);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  FCGX_Request& req() { return req_; }
  int fd() const { return req_.ipcFd; }
  // Names the connection in epoll: never reused, unlike descriptor numbers, so an event
  // that arrives for a connection closed meanwhile cannot be taken for a newer one.
  uint64_t id() const { return id_; }
  // Set when a stop found a request already waiting in it: counted in flight from then on.
  bool counted_at_stop = false;

 private:
  FCGX_Request req_;
  const uint64_t id_;
};

std::once_flag fcgx_init_once;

// epoll ids of the two descriptors that are not connections.
constexpr uint64_t kWakeId = 0;
constexpr uint64_t kListenId = 1;
constexpr uint64_t kFirstConnId = 2;

}  // namespace

// The state shared by the workers and every exchange; exchanges hold it by shared_ptr so a
// parked response completed after the server is gone stays safe.
class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(App& app, FcgiOptions options, ListenSocket listen);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void run();
  void stop();
  // An exchange is over: `conn` (null, or closed by libfcgi, or open for the next request)
  // is armed again for its next request, or closed.
  void finish(std::unique_ptr<Conn> conn);

 private:
  void worker_loop();
  void on_listen_ready();
  void close_idle_without_request();
  bool accept_all_locked();
  void rearm_listen_locked();
  void serve(std::unique_ptr<Conn> conn);
  // (Re-)arms `id` for one readiness event (EPOLLONESHOT): exactly one worker gets it.
  bool arm(int op, int fd, uint64_t id, uint32_t events);

  App& app_;
  const FcgiOptions options_;
  ListenSocket listen_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;

  std::mutex mu_;
  std::condition_variable stop_cv_;  // stopping_ was set
  // During a stop: in_flight_ or live_workers_ went down (not signalled before: a wake-up per
  // request for nobody).
  std::condition_variable done_cv_;
  // Connections waiting (armed in epoll) for their next request, by id. A worker that gets
  // one's event takes it out; finish() puts it back before re-arming it.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> idle_;  // guarded by mu_
  uint64_t next_id_ = kFirstConnId;                           // guarded by mu_
  bool listening_ = false;                                    // guarded by mu_
  Clock::time_point accept_resume_{};                         // guarded by mu_
  size_t in_flight_ = 0;       // guarded by mu_: requests being served or parked
  bool stopping_ = false;      // guarded by mu_
  bool quit_workers_ = false;  // guarded by mu_
  int live_workers_ = 0;       // guarded by mu_
};

namespace {

// The Responder of one FastCGI request: owns the connection until the response is written.
class Exchange : public Responder {
 public:
  Exchange(std::shared_ptr<Core> core, std::unique_ptr<Conn> conn)
      : core_(std::move(core)), conn_(std::move(conn)) {}
  ~Exchange() override {
    if (!sent()) {
      util::log_error("fcgi: a request ended without a response; answering 500");
      send(http::Response::text("500 Internal Server Error\n", 500));
    }
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  void send(http::Response response) override {
    std::unique_ptr<Conn> conn;
    {
      std::lock_guard lock(mu_);
      if (sent_) {
        util::log_error("fcgi: a response was sent twice; the second one is dropped");
        return;
      }
      sent_ = true;
      conn = std::move(conn_);
    }
    FCGX_Stream* out = conn->req().out;
    std::string head = response_head(response);
    // A failed write (the web server closed the connection: client gone) sets the stream's
    // error; FCGX_Finish_r then closes the connection instead of keeping it.
    if (FCGX_PutStr(head.data(), static_cast<int>(head.size()), out) >= 0) {
      const std::string& body = response.body;
      size_t done = 0;
      while (done < body.size()) {
        int chunk = static_cast<int>(std::min<size_t>(body.size() - done, 1 << 20));
        if (FCGX_PutStr(body.data() + done, chunk, out) < 0) break;
        done += static_cast<size_t>(chunk);
      }
    }
    FCGX_Finish_r(&conn->req());
    core_->finish(std::move(conn));
  }

  bool client_gone() const override {
    std::lock_guard lock(mu_);
    if (sent_ || !conn_ || conn_->fd() < 0) return false;
    // The web server closes its end when its client goes away (nginx, Apache).
    pollfd p{conn_->fd(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  bool sent() const {
    std::lock_guard lock(mu_);
    return sent_;
  }

 private:
  const std::shared_ptr<Core> core_;
  mutable std::mutex mu_;
  bool sent_ = false;           // guarded by mu_
  std::unique_ptr<Conn> conn_;  // guarded by mu_; moved out by send()
};

// Reads and drops what is left of the request body so the kept connection is positioned
// at the next request.
void drain(FCGX_Stream* in) {
  char buf[16384];
  while (FCGX_GetStr(buf, sizeof buf, in) > 0) {
  }
}

}  // namespace

Core::Core(App& app, FcgiOptions options, ListenSocket listen)
    : app_(app), options_(std::move(options)), listen_(std::move(listen)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    throw std::runtime_error(std::string("FastCGI: cannot create epoll/eventfd: ") +
                             std::strerror(errno));
  }
  // Level-triggered and never read: once written (at the very end) it wakes every worker.
  arm(EPOLL_CTL_ADD, wake_fd_, kWakeId, EPOLLIN);
  arm(EPOLL_CTL_ADD, listen_.fd(), kListenId, EPOLLIN | EPOLLONESHOT);
  listening_ = true;
}

Core::~Core() {
  idle_.clear();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool Core::arm(int op, int fd, uint64_t id, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd_, op, fd, &ev) != 0) {
    util::log_error("fcgi: epoll_ctl fd " + std::to_string(fd) + ": " + std::strerror(errno));
    return false;
  }
  return true;
}

void Core::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
}

void Core::finish(std::unique_ptr<Conn> conn) {
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
    if (conn && conn->fd() >= 0 && !stopping_) {
      // Into idle_ before it is armed, so the worker that gets its next event finds it;
      // armed under mu_, so a stop cannot close it in between.
      const uint64_t id = conn->id();
      const int fd = conn->fd();
      idle_.emplace(id, std::move(conn));
      if (!arm(EPOLL_CTL_MOD, fd, id, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT)) {
        conn = std::move(idle_[id]);  // cannot be watched: closed rather than leaked
        idle_.erase(id);
      }
    }
    --in_flight_;
  }
  conn.reset();  // closes it when it was not kept (stopping, or libfcgi closed it)
  if (stopping) done_cv_.notify_all();
}

// The stop, part one: no new connections, and idle connections closed, except those with a
// request already waiting in them (sent before the stop; a worker is just not free yet):
// they are served like the requests in flight. (A request that arrives in the instant
// after this look finds its connection closed; nginx retries it elsewhere if it may.)
void Core::close_idle_without_request() {
  std::unique_lock lock(mu_);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_.fd(), nullptr);
  // Connections the kernel accepted before the stop may carry requests already: take them
  // in, to be served or closed below like the others.
  if (listening_) accept_all_locked();
  listen_.close();  // under mu_: no worker is accepting on it
  listening_ = false;
  std::vector<pollfd> probe;
  std::vector<uint64_t> ids;
  for (const auto& [id, conn] : idle_) {
    probe.push_back(pollfd{conn->fd(), POLLIN, 0});
    ids.push_back(id);
  }
  ::poll(probe.data(), probe.size(), 0);
  std::vector<std::unique_ptr<Conn>> closing;
  for (size_t i = 0; i < probe.size(); ++i) {
    auto it = idle_.find(ids[i]);
    if ((probe[i].revents & POLLIN) != 0 && (probe[i].revents & (POLLHUP | POLLERR)) == 0) {
      it->second->counted_at_stop = true;
      ++in_flight_;
      continue;
    }
    closing.push_back(std::move(it->second));
    idle_.erase(it);
  }
  lock.unlock();
  closing.clear();
}

void Core::run() {
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    live_workers_ = options_.threads;
  }
  // Each worker keeps the Core alive: one left behind after the shutdown grace (detached,
  // still in a handler) must find it when its handler returns.
  for (int i = 0; i < options_.threads; ++i) {
    workers.emplace_back([self = shared_from_this()] { self->worker_loop(); });
  }

  std::unique_lock lock(mu_);
  stop_cv_.wait(lock, [&] { return stopping_; });
  lock.unlock();
  // Stop accepting: new connections now fail fast and the web server tries another
  // upstream (the other process, or its next server); idle connections are closed, which
  // nginx treats as a stale keepalive connection and retries.
  close_idle_without_request();
  lock.lock();
  const auto deadline = Clock::now() + options_.shutdown_timeout;
  if (!done_cv_.wait_until(lock, deadline, [&] { return in_flight_ == 0; })) {
    util::log_warn("fcgi: shutdown timeout: " + std::to_string(in_flight_) +
                   " request(s) still running; leaving them");
  }
  quit_workers_ = true;
  lock.unlock();
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  lock.lock();
  // Workers still inside a handler after the deadline get a short grace; then they are
  // left to the process exit rather than holding the shutdown forever.
  bool joined = done_cv_.wait_until(lock, std::max(deadline, Clock::now()) + kPollTick,
                                    [&] { return live_workers_ == 0; });
  lock.unlock();
  for (auto& t : workers) {
    if (joined) {
      t.join();
    } else {
      t.detach();
    }
  }
}

// Every worker waits on the one epoll set and takes one event at a time: a connection with
// a request is served by the worker that woke, with no hand-off to another thread, and the
// one-shot arming means no two workers ever get the same connection.
void Core::worker_loop() {
  for (;;) {
    epoll_event ev{};
    const int n = epoll_wait(epoll_fd_, &ev, 1, static_cast<int>(kPollTick.count()));
    if (n < 0 && errno != EINTR) {
      util::log_error(std::string("fcgi: epoll_wait: ") + std::strerror(errno));
      std::this_thread::sleep_for(kAcceptBackoff);
    }
    std::unique_ptr<Conn> conn;
    {
      std::lock_guard lock(mu_);
      if (quit_workers_) break;
      if (!listening_ && !stopping_ && Clock::now() >= accept_resume_) rearm_listen_locked();
      if (n == 1 && ev.data.u64 >= kFirstConnId) {
        auto it = idle_.find(ev.data.u64);
        if (it != idle_.end()) {  // else closed by a stop meanwhile
          conn = std::move(it->second);
          idle_.erase(it);
          if (!conn->counted_at_stop) ++in_flight_;
        }
      }
    }
    if (n == 1 && ev.data.u64 == kListenId) on_listen_ready();
    if (!conn) continue;
    if ((ev.events & EPOLLIN) == 0) {
      // Hangup without data: the web server closed an idle connection.
      conn.reset();
      finish(nullptr);
      continue;
    }
    // Readable: a request (or the EOF of a closing peer, which libfcgi notices and closes).
    serve(std::move(conn));
  }
  {
    std::lock_guard lock(mu_);
    --live_workers_;
  }
  done_cv_.notify_all();
}

// Accepts under mu_: run() closes the listening socket under mu_ when it stops, so never
// while a worker accepts on it. Accepts are rare (the web server keeps its connections).
void Core::on_listen_ready() {
  std::lock_guard lock(mu_);
  if (!stopping_ && accept_all_locked()) rearm_listen_locked();
}

// Arms the listening socket for its next event; if that fails, accepting pauses and a
// worker tries again after the backoff (instead of never accepting again).
void Core::rearm_listen_locked() {
  listening_ = arm(EPOLL_CTL_MOD, listen_.fd(), kListenId, EPOLLIN | EPOLLONESHOT);
  if (!listening_) accept_resume_ = Clock::now() + kAcceptBackoff;
}

// Accepts every connection waiting on the listening socket into idle_, armed. Returns true
// when the backlog is empty (false: accepting is paused).
bool Core::accept_all_locked() {
  for (;;) {
    int fd = ::accept4(listen_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      util::log_error(std::string("fcgi: accept on ") + listen_.description() + ": " +
                      std::strerror(errno) + "; pausing accepts");
      // Out of descriptors (EMFILE/ENFILE) or similar: leave the socket disarmed for a moment
      // instead of spinning on it; a worker re-arms it after the backoff.
      listening_ = false;
      accept_resume_ = Clock::now() + kAcceptBackoff;
      return false;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        (addr.ss_family == AF_INET || addr.ss_family == AF_INET6)) {
      // libfcgi writes the end of the response in small records: no Nagle delay on them.
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    const uint64_t id = next_id_++;
    idle_.emplace(id, std::make_unique<Conn>(fd, id));
    if (!arm(EPOLL_CTL_ADD, fd, id, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT)) idle_.erase(id);
  }
}

void Core::serve(std::unique_ptr<Conn> conn) {
  if (FCGX_Accept_r(&conn->req()) < 0) {
    // The peer closed the connection (or broke the protocol); libfcgi closed it.
    finish(std::move(conn));
    return;
  }
  http::Request request;
  fill_request(conn->req().envp, request);
  FCGX_Stream* in = conn->req().in;

  const size_t limit = app_.limits().max_body_bytes;
  auto too_large = [&] {
    drain(in);
    auto exchange = std::make_shared<Exchange>(shared_from_this(), std::move(conn));
    // Through the app, so the page gets the security headers and an access log line.
    app_.reject(request, 413,
                "The request body is larger than " + std::to_string(limit) + " bytes.", exchange);
  };
  std::optional<uint64_t> declared = content_length(request);
  if (declared && *declared > limit) return too_large();
  if (declared) request.body.reserve(static_cast<size_t>(*declared));
  char buf[16384];
  for (;;) {
    int got = FCGX_GetStr(buf, sizeof buf, in);
    if (got <= 0) break;
    if (request.body.size() + static_cast<size_t>(got) > limit) return too_large();
    request.body.append(buf, static_cast<size_t>(got));
  }

  auto exchange = std::make_shared<Exchange>(shared_from_this(), std::move(conn));
  try {
    app_.handle(std::move(request), exchange);
  } catch (const std::exception& e) {
    util::log_error(std::string("fcgi: unhandled exception from the app: ") + e.what());
    if (!exchange->sent()) exchange->send(app_.error_page(500, "Internal error."));
  }
  // Not sent yet: the request is parked; whoever holds the exchange sends later.
}

}  // namespace fcgi

FcgiServer::FcgiServer(App& app, FcgiOptions options) {
  if (options.threads < 1) throw std::runtime_error("FastCGI: server.threads must be >= 1");
  std::call_once(fcgi::fcgx_init_once, [] {
    if (int rc = FCGX_Init(); rc != 0) {
      throw std::runtime_error("FastCGI: FCGX_Init failed with " + std::to_string(rc));
    }
  });
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  auto listen = fcgi::ListenSocket::open(options.listen, options.socket_mode);
  core_ = std::make_shared<fcgi::Core>(app, std::move(options), std::move(listen));
}

FcgiServer::~FcgiServer() = default;

void FcgiServer::run() { core_->run(); }

void FcgiServer::stop() { core_->stop(); }

}  // namespace kagi
