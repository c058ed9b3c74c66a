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
#include <deque>
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

// How long the poller sleeps at most between looks at its state, and how long it stops
// accepting after the process ran out of file descriptors.
constexpr auto kPollTick = std::chrono::milliseconds(500);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

// One connection from the web server with the libfcgi request that reads and writes it.
// The FCGX_Request lives as long as the connection because libfcgi keeps the connection
// state (ipcFd, keepConnection) in it between requests.
class Conn {
 public:
  explicit Conn(int fd) {
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

 private:
  FCGX_Request req_;
};

std::once_flag fcgx_init_once;

}  // namespace

// The state shared by the poller, the workers and every exchange; exchanges hold it by
// shared_ptr so a parked response completed after the server is gone stays safe.
class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(App& app, FcgiOptions options, ListenSocket listen);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void run();
  void stop();
  // An exchange is over: `conn` (null, or closed by libfcgi, or open for the next request)
  // goes back to the poller or is closed.
  void finish(std::unique_ptr<Conn> conn);

 private:
  void poll_loop();
  void accept_all();
  void worker_loop();
  void serve(std::unique_ptr<Conn> conn);
  void wake();
  void epoll_add(int fd);

  App& app_;
  const FcgiOptions options_;
  ListenSocket listen_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;

  // Touched by the poller thread only.
  std::unordered_map<int, std::unique_ptr<Conn>> idle_;
  bool listening_ = false;
  Clock::time_point accept_resume_{};

  std::mutex mu_;
  std::condition_variable work_cv_;              // queue_ got work or quit_workers_ was set
  std::condition_variable done_cv_;              // in_flight_ or live_workers_ went down
  std::deque<std::unique_ptr<Conn>> queue_;      // guarded by mu_: readable, for workers
  std::vector<std::unique_ptr<Conn>> returned_;  // guarded by mu_: back from workers
  size_t in_flight_ = 0;                         // guarded by mu_: queued + being served + parked
  bool stopping_ = false;                        // guarded by mu_
  bool quit_workers_ = false;                    // guarded by mu_
  int live_workers_ = 0;                         // guarded by mu_
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
  epoll_add(wake_fd_);
  epoll_add(listen_.fd());
  listening_ = true;
}

Core::~Core() {
  idle_.clear();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void Core::epoll_add(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    util::log_error("fcgi: epoll_ctl ADD fd " + std::to_string(fd) + ": " + std::strerror(errno));
  }
}

void Core::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void Core::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake();
}

void Core::finish(std::unique_ptr<Conn> conn) {
  bool keep = conn && conn->fd() >= 0;
  {
    std::lock_guard lock(mu_);
    if (keep && !stopping_) {
      returned_.push_back(std::move(conn));
    }
    --in_flight_;
  }
  conn.reset();  // closes it when it was not kept (stopping, or libfcgi closed it)
  if (keep) wake();
  done_cv_.notify_all();
}

void Core::run() {
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    live_workers_ = options_.threads;
  }
  for (int i = 0; i < options_.threads; ++i) workers.emplace_back([this] { worker_loop(); });

  poll_loop();  // returns once stop() was called; nothing new is accepted after this

  const auto deadline = Clock::now() + options_.shutdown_timeout;
  std::unique_lock lock(mu_);
  if (!done_cv_.wait_until(lock, deadline, [&] { return in_flight_ == 0; })) {
    util::log_warn("fcgi: shutdown timeout: " + std::to_string(in_flight_) +
                   " request(s) still running; leaving them");
  }
  quit_workers_ = true;
  work_cv_.notify_all();
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

void Core::poll_loop() {
  epoll_event events[64];
  bool stopping = false;
  while (!stopping) {
    if (!listening_ && Clock::now() >= accept_resume_) {
      epoll_add(listen_.fd());
      listening_ = true;
    }
    int timeout_ms = static_cast<int>(kPollTick.count());
    int n = epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      util::log_error(std::string("fcgi: epoll_wait: ") + std::strerror(errno));
      std::this_thread::sleep_for(kAcceptBackoff);
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
      } else if (fd == listen_.fd()) {
        accept_all();
      } else if (auto it = idle_.find(fd); it != idle_.end()) {
        std::unique_ptr<Conn> conn = std::move(it->second);
        idle_.erase(it);
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        if ((events[i].events & EPOLLIN) == 0) continue;  // hangup, no data: closed here
        // Readable: a request (or the EOF of a closing peer, which libfcgi notices and
        // closes) is waiting. Hand it to a worker.
        {
          std::lock_guard lock(mu_);
          ++in_flight_;
          queue_.push_back(std::move(conn));
        }
        work_cv_.notify_one();
      }
    }
    std::vector<std::unique_ptr<Conn>> back;
    {
      std::lock_guard lock(mu_);
      back.swap(returned_);
      stopping = stopping_;
    }
    for (auto& conn : back) {
      if (stopping) continue;  // closed when `back` goes out of scope
      int fd = conn->fd();
      idle_.emplace(fd, std::move(conn));
      epoll_add(fd);
    }
  }
  // Stop accepting: new connections now fail fast and the web server tries another
  // upstream (the other process, or its next server); idle connections are closed, which
  // nginx treats as a stale keepalive connection and retries.
  listen_.close();
  idle_.clear();
}

void Core::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      util::log_error(std::string("fcgi: accept on ") + listen_.description() + ": " +
                      std::strerror(errno) + "; pausing accepts");
      // Out of descriptors (EMFILE/ENFILE) or similar: stop polling the socket for a moment
      // instead of spinning on it.
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_.fd(), nullptr);
      listening_ = false;
      accept_resume_ = Clock::now() + kAcceptBackoff;
      return;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        (addr.ss_family == AF_INET || addr.ss_family == AF_INET6)) {
      // libfcgi writes the end of the response in small records: no Nagle delay on them.
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    idle_.emplace(fd, std::make_unique<Conn>(fd));
    epoll_add(fd);
  }
}

void Core::worker_loop() {
  for (;;) {
    std::unique_ptr<Conn> conn;
    {
      std::unique_lock lock(mu_);
      while (queue_.empty() && !quit_workers_) work_cv_.wait_for(lock, kPollTick);
      if (queue_.empty()) break;  // quit_workers_ and nothing left
      conn = std::move(queue_.front());
      queue_.pop_front();
    }
    serve(std::move(conn));
  }
  {
    std::lock_guard lock(mu_);
    --live_workers_;
  }
  done_cv_.notify_all();
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
