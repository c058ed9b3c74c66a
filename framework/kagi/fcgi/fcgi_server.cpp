#include <kagi/fcgi/fcgi_server.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include <kagi/app/app.hpp>
#include <kagi/fcgi/cgi_params.hpp>
#include <kagi/fcgi/listen_socket.hpp>
#include <kagi/fcgi/protocol.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi {
namespace fcgi {
namespace {

using Clock = std::chrono::steady_clock;

// How long a worker waits at most between looks at the shared state (deadlines are checked
// at this pace), and how long the process stops accepting after it ran out of descriptors.
constexpr auto kPollTick = std::chrono::milliseconds(200);
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// An out-of-descriptors episode ends only after accepts have worked this long without a new
// failure: at the limit, a freed descriptor lets one accept through between failures, and
// ending the episode on that one accept logged two lines per flap.
constexpr auto kAcceptEpisodeQuiet = std::chrono::seconds(1);
// Most bytes a worker reads from one connection per readiness event, so that one fast
// sender does not keep a worker from the others (the event comes again if more is waiting).
constexpr size_t kReadPerEvent = 256 * 1024;
// While a request is parked, at most this much of what the web server sends next is read
// (looking for its FCGI_ABORT_REQUEST); nginx and Apache send nothing else meanwhile.
constexpr size_t kParkedReadLimit = 64 * 1024;
// Where a connection is in its exchange: which deadline applies.
enum class Stage {
  kIdle,   // between requests: none (the web server owns the connection's lifetime)
  kHead,   // reading params: read_timeout from the first byte
  kBody,   // reading the body: body_timeout from the end of the params
  kWrite,  // the web server is not taking the response: read_timeout without progress
};

// One connection from the web server and the request being read from it.
class Conn {
 public:
  Conn(int fd, uint64_t id, ReaderLimits limits) : reader(limits), fd_(fd), id_(id) {}
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  int fd() const { return fd_.get(); }
  // Names the connection in epoll: never reused, unlike descriptor numbers, so an event
  // that arrives for a connection closed meanwhile cannot be taken for a newer one.
  uint64_t id() const { return id_; }

  RequestReader reader;
  Stage stage = Stage::kIdle;
  // When the current stage must be over (a stalled peer is dropped, a slow body gets 408).
  Clock::time_point deadline = Clock::time_point::max();
  // Idle in Core::conns_ with a count in Core::in_flight_ of its own (a response being
  // written, or a request begun when a stop came): whoever takes it takes that count.
  bool holds_count = false;
  // The encoded response, while the web server takes it in pieces (Stage::kWrite).
  std::string out;
  size_t out_done = 0;
  // False once the web server's client is known to be gone (the connection closed, or
  // FCGI_ABORT_REQUEST, seen while the request was parked): closed after the response.
  bool reusable = true;
  // The last read stopped at its limit: bytes may be waiting that no new edge announces.
  bool more_waiting = false;
  // The web server shut its side (an event said EPOLLRDHUP or EPOLLHUP): no request comes
  // after the one being read. The edge that said so is not repeated.
  bool input_closed = false;
  // Watched for EPOLLOUT too (a response being written, or a record already buffered): the
  // next park watches for input only again.
  bool watching_out = false;

 private:
  const util::UniqueFd fd_;
  const uint64_t id_;
};

// What a connection is watched for, from its accept to its close: edge-triggered, so that a
// worker done with it puts it back without an epoll_ctl (Core::park_locked).
constexpr uint32_t kConnEvents = EPOLLIN | EPOLLRDHUP | EPOLLET;

// epoll ids of the two descriptors that are not connections.
constexpr uint64_t kWakeId = 0;
constexpr uint64_t kListenId = 1;
constexpr uint64_t kFirstConnId = 2;

// Reads what is waiting on `conn`, at most `limit` bytes (conn.more_waiting: it stopped there,
// with bytes perhaps left). Returns false when the peer closed the connection or it failed.
bool read_available(Conn& conn, size_t limit) {
  conn.more_waiting = false;
  char buf[65536];
  size_t total = 0;
  while (total < limit) {
    const size_t want = std::min(sizeof buf, limit - total);
    const ssize_t n = ::read(conn.fd(), buf, want);
    if (n > 0) {
      conn.reader.append(buf, static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      // A short read took all there was: no second read just to hear EAGAIN (a request
      // costs one read). If more came meanwhile, its event marks the connection
      // (Core::park_locked).
      if (static_cast<size_t>(n) < want) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // 0: end of stream; else ECONNRESET and the like
  }
  conn.more_waiting = true;
  return true;
}

enum class WriteStatus { kDone, kBlocked, kFailed };

// Writes what it can of conn.out without blocking. `progressed`: some bytes went out.
WriteStatus write_some(Conn& conn, bool& progressed) {
  progressed = false;
  while (conn.out_done < conn.out.size()) {
    const ssize_t n = ::send(conn.fd(), conn.out.data() + conn.out_done,
                             conn.out.size() - conn.out_done, MSG_NOSIGNAL);
    if (n > 0) {
      conn.out_done += static_cast<size_t>(n);
      progressed = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return WriteStatus::kBlocked;
    return WriteStatus::kFailed;  // the web server closed the connection: its client left
  }
  return WriteStatus::kDone;
}

}  // namespace

// The state shared by the workers and every exchange; exchanges hold it by shared_ptr so a
// parked response completed after the server is gone stays safe.
class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(App& app, FcgiOptions options, ListenSocket listen);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void run() KAGI_EXCLUDES(mu_);
  void stop() KAGI_EXCLUDES(mu_);
  // An exchange is over: `conn` waits for its next request (kKeep), or is closed (kClose).
  enum class Then { kKeep, kClose };
  void finish(std::unique_ptr<Conn> conn, Then then) KAGI_EXCLUDES(mu_);
  // Writes conn->out, the response; what the web server does not take at once is written
  // from the epoll set as it does (no thread waits on a slow reader). Then finish().
  void write_response(std::unique_ptr<Conn> conn) KAGI_EXCLUDES(mu_);
  const FcgiOptions& options() const { return options_; }

 private:
  void worker_loop() KAGI_EXCLUDES(mu_);
  void on_listen_ready() KAGI_EXCLUDES(mu_);
  void close_idle_without_request() KAGI_EXCLUDES(mu_);
  bool accept_all_locked() KAGI_REQUIRES(mu_);
  void end_accept_episode_locked(Clock::time_point now) KAGI_REQUIRES(mu_);
  void rearm_listen_locked() KAGI_REQUIRES(mu_);
  // Reads what arrived on `conn`; serves the request once it is complete, else puts the
  // connection back to wait for more.
  void on_readable(std::unique_ptr<Conn> conn) KAGI_EXCLUDES(mu_);
  // `conn` goes back to conns_ to wait for more of its request (or its next one). It stays in
  // the epoll set, edge-triggered, all along: re-armed (one epoll_ctl) only if an event came
  // while a worker or a parked exchange held it, a read stopped at its limit, or a whole
  // record is already buffered; a request read and answered in one go costs none. False
  // (conn left in place) when it cannot be watched.
  bool park_locked(std::unique_ptr<Conn>& conn) KAGI_REQUIRES(mu_);
  // `conn` goes back watched for EPOLLOUT as well, keeping its in-flight count, until the
  // web server takes more of its response. False as park_locked.
  bool park_writing_locked(std::unique_ptr<Conn>& conn, bool progressed) KAGI_REQUIRES(mu_);
  // Every open connection, by id: its Conn while it waits in the epoll set (idle), none while
  // a worker or an exchange holds it (being read, served, parked or written), and whether an
  // event came for it meanwhile. Edge-triggered, that event is not repeated: the connection is
  // re-armed when it comes back, so that what arrived is not left unread. One slot from the
  // accept to the close: a request allocates nothing here.
  struct Slot {
    std::unique_ptr<Conn> conn;
    bool marked = false;
  };
  using Slots = std::unordered_map<uint64_t, Slot>;
  // Takes the idle connection of `slot` (its events meanwhile mark the slot), with its counts:
  // in flight (unless it holds its own), no longer a deadline to sweep.
  std::unique_ptr<Conn> take_locked(Slot& slot) KAGI_REQUIRES(mu_);
  // Puts `conn` back into its slot `it` and, if `rearm`, re-arms it for `events`
  // (edge-triggered: the kernel reports at once what is ready now). False (conn left in place,
  // the slot gone) when it cannot be watched.
  bool put_idle_locked(Slots::iterator it, std::unique_ptr<Conn>& conn, bool rearm, uint32_t events)
      KAGI_REQUIRES(mu_);
  // Takes the idle connections whose deadline passed; the caller ends them.
  std::vector<std::unique_ptr<Conn>> take_expired_locked(Clock::time_point now) KAGI_REQUIRES(mu_);
  void expire(std::unique_ptr<Conn> conn) KAGI_EXCLUDES(mu_);
  void serve(std::unique_ptr<Conn> conn) KAGI_EXCLUDES(mu_);
  // Adds or modifies `id`'s watch in the epoll set.
  bool arm(int op, int fd, uint64_t id, uint32_t events);

  App& app_;
  const FcgiOptions options_;
  const ReaderLimits reader_limits_;
  // Names the listening socket in log lines; a copy, readable without mu_.
  const std::string listen_name_;
  // Set once in the constructor, closed in the destructor.
  util::UniqueFd epoll_fd_;
  util::UniqueFd wake_fd_;

  util::Mutex mu_;
  util::CondVar stop_cv_;  // stopping_ was set
  // During a stop: in_flight_ or live_workers_ went down (not signalled before: a wake-up per
  // request for nobody).
  util::CondVar done_cv_;
  // Accepted on and closed under mu_, so a stop never closes it under an accepting worker.
  ListenSocket listen_ KAGI_GUARDED_BY(mu_);
  // Connections waiting (armed in epoll) for bytes of their next or current request, by id.
  // A worker that gets one's event takes it out; it goes back before it is re-armed.
  Slots conns_ KAGI_GUARDED_BY(mu_);
  // How many idle connections have a deadline (a request begun): the sweep skips the
  // scan when none has.
  size_t timed_ KAGI_GUARDED_BY(mu_) = 0;
  Clock::time_point next_sweep_ KAGI_GUARDED_BY(mu_){};
  uint64_t next_id_ KAGI_GUARDED_BY(mu_) = kFirstConnId;
  bool listening_ KAGI_GUARDED_BY(mu_) = false;
  Clock::time_point accept_resume_ KAGI_GUARDED_BY(mu_){};
  uint64_t accept_failures_ KAGI_GUARDED_BY(mu_) = 0;  // in the open episode (0: none)
  Clock::time_point last_accept_failure_ KAGI_GUARDED_BY(mu_){};
  bool accepted_in_episode_ KAGI_GUARDED_BY(mu_) = false;  // since the last failure
  size_t in_flight_ KAGI_GUARDED_BY(mu_) = 0;  // connections being read, served or parked
  bool stopping_ KAGI_GUARDED_BY(mu_) = false;
  bool quit_workers_ KAGI_GUARDED_BY(mu_) = false;
  int live_workers_ KAGI_GUARDED_BY(mu_) = 0;
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

  void send(http::Response response) override KAGI_EXCLUDES(mu_) {
    std::unique_ptr<Conn> conn;
    {
      util::MutexLock lock(mu_);
      if (sent_) {
        util::log_error("fcgi: a response was sent twice; the second one is dropped");
        return;
      }
      sent_ = true;
      conn = std::move(conn_);
    }
    conn->out = encode_response(conn->reader.request_id(), response_head(response), response.body);
    conn->out_done = 0;
    core_->write_response(std::move(conn));
  }

  // The web server closes its end when its client goes away (nginx, Apache), or sends
  // FCGI_ABORT_REQUEST: both are looked for, without blocking, each time this is asked.
  bool client_gone() const override KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    if (sent_ || !conn_) return false;
    if (gone_ || conn_->reader.aborted()) return true;
    pollfd p{conn_->fd(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      gone_ = true;
    } else if ((p.revents & POLLIN) != 0 && conn_->reader.buffered() < kParkedReadLimit) {
      if (!read_available(*conn_, kParkedReadLimit - conn_->reader.buffered())) gone_ = true;
      conn_->reader.advance();  // the request is complete: this only looks for an abort
      if (conn_->reader.aborted()) gone_ = true;
    }
    if (gone_) conn_->reusable = false;
    return gone_;
  }

  bool sent() const KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    return sent_;
  }

  // Not answered yet (parked, or waiting for a group flush): keep only what the answer needs.
  void shrink_parked() KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    if (sent_ || !conn_) return;
    conn_->reader.release_parked();
    conn_->out = std::string();  // the last answer's buffer
  }

 private:
  const std::shared_ptr<Core> core_;
  mutable util::Mutex mu_;
  bool sent_ KAGI_GUARDED_BY(mu_) = false;
  mutable bool gone_ KAGI_GUARDED_BY(mu_) = false;
  std::unique_ptr<Conn> conn_ KAGI_GUARDED_BY(mu_);  // moved out by send()
};

// FCGI_PARAMS carry the request headers (each name grows by "HTTP_", each pair by up to 8
// length bytes) and about 1 KiB of CGI variables: twice the header limit plus 8 KiB.
ReaderLimits reader_limits(const App& app) {
  ReaderLimits limits;
  limits.max_params_bytes = 2 * app.limits().max_header_bytes + 8192;
  limits.max_body_bytes = app.limits().max_body_bytes;
  return limits;
}

}  // namespace

Core::Core(App& app, FcgiOptions options, ListenSocket listen)
    : app_(app),
      options_(std::move(options)),
      reader_limits_(reader_limits(app)),
      listen_name_(listen.description()),
      listen_(std::move(listen)) {
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_fd_ || !wake_fd_) {
    throw std::runtime_error(std::string("FastCGI: cannot create epoll/eventfd: ") +
                             std::strerror(errno));
  }
  // Level-triggered and never read: once written (at the very end) it wakes every worker.
  arm(EPOLL_CTL_ADD, wake_fd_.get(), kWakeId, EPOLLIN);
  arm(EPOLL_CTL_ADD, listen_.fd(), kListenId, EPOLLIN | EPOLLONESHOT);
  listening_ = true;
}

// The idle connections close first, then (members) the eventfd and the epoll set.
Core::~Core() { conns_.clear(); }

bool Core::arm(int op, int fd, uint64_t id, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd_.get(), op, fd, &ev) != 0) {
    util::log_error("fcgi: epoll_ctl fd " + std::to_string(fd) + ": " + std::strerror(errno));
    return false;
  }
  return true;
}

void Core::stop() {
  // Notified under mu_: run() cannot see stopping_, return, and let the Core be destroyed
  // while this thread is still inside notify_all (the main thread destroys the server as
  // soon as run() returns; stop() comes from a signal-watching thread).
  util::MutexLock lock(mu_);
  stopping_ = true;
  stop_cv_.notify_all();
}

std::unique_ptr<Conn> Core::take_locked(Slot& slot) {
  Conn& conn = *slot.conn;
  if (conn.stage != Stage::kIdle) --timed_;
  if (!conn.holds_count) ++in_flight_;
  conn.holds_count = false;
  slot.marked = false;
  return std::move(slot.conn);
}

bool Core::put_idle_locked(Slots::iterator it, std::unique_ptr<Conn>& conn, bool rearm,
                           uint32_t events) {
  // Back in its slot before it is re-armed, so the worker that gets its next event finds it;
  // under mu_, so a stop cannot close it in between.
  const uint64_t id = conn->id();
  const int fd = conn->fd();
  it->second.conn = std::move(conn);
  it->second.marked = false;
  if (rearm && !arm(EPOLL_CTL_MOD, fd, id, events)) {
    conn = std::move(it->second.conn);  // cannot be watched: closed rather than leaked
    conns_.erase(it);
    return false;
  }
  return true;
}

bool Core::park_locked(std::unique_ptr<Conn>& conn) {
  // The deadline of the stage the request is in: from its first byte, its params must
  // arrive within read_timeout; from the end of its params, its body within body_timeout.
  const Stage stage = conn->reader.params_done() ? Stage::kBody
                      : conn->reader.started()   ? Stage::kHead
                                                 : Stage::kIdle;
  if (stage != conn->stage) {
    conn->stage = stage;
    const auto now = Clock::now();
    conn->deadline = stage == Stage::kIdle   ? Clock::time_point::max()
                     : stage == Stage::kHead ? now + options_.read_timeout
                                             : now + options_.body_timeout;
  }
  // A whole record already buffered (a next request read along with this one) would wait
  // for an event that never comes: EPOLLOUT fires at once on a connection that can be
  // written. Only then: part of a record waits for its peer's next bytes (EPOLLIN), and
  // EPOLLOUT would wake a worker again whenever the web server reads.
  const bool buffered = conn->reader.record_ready();
  // Re-armed, the kernel looks at once at what is ready: what came while the connection was
  // held, what a read left at its limit, the buffered record. Else nothing is waiting that a
  // new edge would not announce, and the watch stays as it is.
  const auto slot = conns_.try_emplace(conn->id()).first;  // its own, kept while held
  const bool rearm = buffered || conn->more_waiting || conn->watching_out || slot->second.marked;
  conn->watching_out = buffered;
  const Stage parked_stage = conn->stage;
  if (!put_idle_locked(slot, conn, rearm, kConnEvents | (buffered ? uint32_t{EPOLLOUT} : 0u))) {
    return false;
  }
  if (parked_stage != Stage::kIdle) ++timed_;
  return true;
}

void Core::finish(std::unique_ptr<Conn> conn, Then then) {
  bool stopping = false;
  {
    util::MutexLock lock(mu_);
    stopping = stopping_;
    --in_flight_;  // this read or exchange is over
    // While stopping, a connection is kept only for a request already begun in it, which
    // counts in flight until it is served or dropped.
    bool kept = false;
    if (then == Then::kKeep && (!stopping_ || conn->reader.started())) {
      conn->holds_count = stopping_;
      kept = park_locked(conn);
      if (kept && stopping_) ++in_flight_;
    }
    if (!kept) conns_.erase(conn->id());
  }
  conn.reset();  // closes it when it was not kept
  if (stopping) done_cv_.notify_all();
}

void Core::write_response(std::unique_ptr<Conn> conn) {
  bool progressed = false;
  const WriteStatus status = write_some(*conn, progressed);
  if (status == WriteStatus::kBlocked) {
    util::MutexLock lock(mu_);
    if (park_writing_locked(conn, progressed)) return;
  }
  if (status != WriteStatus::kDone) {
    // The web server closed the connection (its client went away), or it cannot be
    // watched: the connection is closed, the process carries on.
    return finish(std::move(conn), Then::kClose);
  }
  conn->out = std::string();
  conn->out_done = 0;
  const bool keep = conn->reusable && conn->reader.keep_conn();
  conn->reader.next();
  finish(std::move(conn), keep ? Then::kKeep : Then::kClose);
}

bool Core::park_writing_locked(std::unique_ptr<Conn>& conn, bool progressed) {
  if (conn->stage != Stage::kWrite || progressed) {
    conn->stage = Stage::kWrite;
    conn->deadline = Clock::now() + options_.read_timeout;
  }
  // Keeps the count it was written under: a stop waits for the response to go out.
  conn->holds_count = true;
  conn->watching_out = true;
  // Watched for output only: input that waits meanwhile (an abort record, the next request)
  // would be reported at once and again after every attempt, a worker spinning on a response
  // the web server does not take. park_locked's re-arm after the write reports it. (A hang-up
  // is always reported.)
  if (!put_idle_locked(conns_.try_emplace(conn->id()).first, conn, true, EPOLLOUT | EPOLLET)) {
    conn->holds_count = false;
    return false;
  }
  ++timed_;
  return true;
}

// The stop, part one: no new connections, and idle connections closed, except those with a
// request already begun in them (sent before the stop; a worker is just not free yet): they
// are served like the requests in flight. (A request that arrives in the instant after this
// look finds its connection closed; nginx retries it elsewhere if it may.)
void Core::close_idle_without_request() {
  std::vector<std::unique_ptr<Conn>> closing;  // closed after mu_ is released
  util::MutexLock lock(mu_);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, listen_.fd(), nullptr);
  // Connections the kernel accepted before the stop may carry requests already: take them
  // in, to be served or closed below like the others.
  if (listening_) accept_all_locked();
  listen_.close();  // under mu_: no worker is accepting on it
  listening_ = false;
  std::vector<pollfd> probe;
  std::vector<uint64_t> ids;
  for (const auto& [id, slot] : conns_) {
    if (!slot.conn) continue;  // held: served or answered, then closed by finish()
    probe.push_back(pollfd{slot.conn->fd(), POLLIN, 0});
    ids.push_back(id);
  }
  ::poll(probe.data(), probe.size(), 0);
  for (size_t i = 0; i < probe.size(); ++i) {
    auto it = conns_.find(ids[i]);
    Conn& conn = *it->second.conn;
    const bool waiting =
        (probe[i].revents & POLLIN) != 0 && (probe[i].revents & (POLLHUP | POLLERR)) == 0;
    if (waiting || conn.reader.started()) {
      if (!conn.holds_count) {
        conn.holds_count = true;
        ++in_flight_;
      }
      continue;
    }
    if (conn.stage != Stage::kIdle) --timed_;
    closing.push_back(std::move(it->second.conn));
    conns_.erase(it);
  }
}

void Core::run() {
  std::vector<std::thread> workers;
  {
    util::MutexLock lock(mu_);
    live_workers_ = options_.threads;
  }
  // Each worker keeps the Core alive: one left behind after the shutdown grace (detached,
  // still in a handler) must find it when its handler returns.
  for (int i = 0; i < options_.threads; ++i) {
    workers.emplace_back([self = shared_from_this()] { self->worker_loop(); });
  }

  {
    util::MutexLock lock(mu_);
    while (!stopping_) stop_cv_.wait(mu_);
  }
  // Stop accepting: new connections now fail fast and the web server tries another
  // upstream (the other process, or its next server); idle connections are closed, which
  // nginx treats as a stale keepalive connection and retries.
  close_idle_without_request();
  Clock::time_point deadline;
  {
    util::MutexLock lock(mu_);
    deadline = Clock::now() + options_.shutdown_timeout;
    while (in_flight_ != 0 && done_cv_.wait_until(mu_, deadline) != std::cv_status::timeout) {
    }
    if (in_flight_ != 0) {
      util::log_warn("fcgi: shutdown timeout: " + std::to_string(in_flight_) +
                     " request(s) still running; leaving them");
    }
    quit_workers_ = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
  bool joined = false;
  {
    util::MutexLock lock(mu_);
    // Workers still inside a handler after the deadline get a short grace; then they are
    // left to the process exit rather than holding the shutdown forever.
    const auto grace = std::max(deadline, Clock::now()) + kPollTick;
    while (live_workers_ != 0 && done_cv_.wait_until(mu_, grace) != std::cv_status::timeout) {
    }
    joined = live_workers_ == 0;
  }
  for (auto& t : workers) {
    if (joined) {
      t.join();
    } else {
      t.detach();
    }
  }
}

// Every worker waits on the one epoll set and takes one event at a time: a connection with
// bytes is read by the worker that woke, and served by it once its request is complete, with
// no hand-off to another thread. The worker takes the connection out of its slot, so no two
// workers ever hold the same one: an event that comes for it meanwhile only marks the slot.
void Core::worker_loop() {
  for (;;) {
    epoll_event ev{};
    const int n = epoll_wait(epoll_fd_.get(), &ev, 1, static_cast<int>(kPollTick.count()));
    if (n < 0 && errno != EINTR) {
      util::log_error(std::string("fcgi: epoll_wait: ") + std::strerror(errno));
      std::this_thread::sleep_for(kAcceptBackoff);
    }
    std::unique_ptr<Conn> conn;
    std::vector<std::unique_ptr<Conn>> expired;
    {
      util::MutexLock lock(mu_);
      if (quit_workers_) break;
      const auto now = Clock::now();
      // Accepting resumes with an accept, not only with the socket re-armed: what queued
      // meanwhile is taken now, and an accept that finds the queue empty shows descriptors
      // are free again, so the episode can end without waiting for another client.
      if (!listening_ && !stopping_ && now >= accept_resume_ && accept_all_locked()) {
        rearm_listen_locked();
      }
      if (now >= next_sweep_) {
        next_sweep_ = now + kPollTick;
        expired = take_expired_locked(now);
        end_accept_episode_locked(now);
      }
      if (n == 1 && ev.data.u64 >= kFirstConnId) {
        auto it = conns_.find(ev.data.u64);  // none: closed by a stop or a deadline meanwhile
        if (it != conns_.end() && it->second.conn) {
          conn = take_locked(it->second);
          if ((ev.events & (EPOLLRDHUP | EPOLLHUP)) != 0) conn->input_closed = true;
        } else if (it != conns_.end()) {
          it->second.marked = true;  // held: looked at again when its holder puts it back
        }
      }
    }
    for (auto& e : expired) expire(std::move(e));
    if (n == 1 && ev.data.u64 == kListenId) on_listen_ready();
    if (conn) on_readable(std::move(conn));
  }
  {
    util::MutexLock lock(mu_);
    --live_workers_;
  }
  done_cv_.notify_all();
}

std::vector<std::unique_ptr<Conn>> Core::take_expired_locked(Clock::time_point now) {
  std::vector<std::unique_ptr<Conn>> out;
  if (timed_ == 0) return out;
  for (auto& [id, slot] : conns_) {
    if (!slot.conn || slot.conn->deadline > now) continue;  // past it: never Stage::kIdle
    out.push_back(take_locked(slot));  // held now: its pending event, if any, marks the slot
  }
  return out;
}

// A request that did not arrive in time. Params complete, body too slow: 408. The connection
// stays open: after the response the reader skips what still comes of that body, and the
// web server may send its next request (Apache reuses the connection once it has the
// answer; closing it under Apache, still sending the body, makes it answer 503 instead of
// passing the 408 on). Params incomplete: the peer stalled in the middle of a record, so
// there is nothing to answer; the connection is dropped.
void Core::expire(std::unique_ptr<Conn> conn) {
  if (conn->stage == Stage::kWrite) {
    util::log_warn("fcgi: the web server took nothing of a response for " +
                   std::to_string(options_.read_timeout.count()) +
                   " ms (limits.fcgi_read_timeout_ms); closing its connection");
    return finish(std::move(conn), Then::kClose);
  }
  if (conn->stage != Stage::kBody) {
    util::log_warn("fcgi: dropped a connection on " + listen_name_ +
                   " that sent no complete request head within " +
                   std::to_string(options_.read_timeout.count()) +
                   " ms (limits.fcgi_read_timeout_ms)");
    return finish(std::move(conn), Then::kClose);
  }
  http::Request request;
  fill_request(conn->reader.envp(), request);
  auto exchange = std::make_shared<Exchange>(shared_from_this(), std::move(conn));
  app_.reject(request, 408,
              "The request body did not arrive within " +
                  std::to_string(options_.body_timeout.count()) + " ms.",
              exchange);
}

// Accepts under mu_: run() closes the listening socket under mu_ when it stops, so never
// while a worker accepts on it. Accepts are rare (the web server keeps its connections).
void Core::on_listen_ready() {
  util::MutexLock lock(mu_);
  if (!stopping_ && accept_all_locked()) rearm_listen_locked();
}

// Arms the listening socket for its next event; if that fails, accepting pauses and a
// worker tries again after the backoff (instead of never accepting again).
void Core::rearm_listen_locked() {
  listening_ = arm(EPOLL_CTL_MOD, listen_.fd(), kListenId, EPOLLIN | EPOLLONESHOT);
  if (!listening_) accept_resume_ = Clock::now() + kAcceptBackoff;
}

// Accepts every connection waiting on the listening socket into conns_, armed. Returns true
// when the backlog is empty (false: accepting is paused).
bool Core::accept_all_locked() {
  for (;;) {
    int fd = ::accept4(listen_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The kernel takes the descriptor before it looks at the queue (EMFILE comes first):
        // an empty queue means an accept would have worked.
        accepted_in_episode_ = true;
        return true;
      }
      // Out of descriptors (EMFILE/ENFILE) or similar: leave the socket disarmed for a moment
      // instead of spinning on it; a worker re-arms it after the backoff. Logged once per
      // episode: a line every backoff would fill the disk while the cause lasts.
      last_accept_failure_ = Clock::now();
      accepted_in_episode_ = false;
      if (accept_failures_++ == 0) {
        util::log_error(std::string("fcgi: accept on ") + listen_name_ + ": " +
                        std::strerror(errno) + "; pausing accepts, retrying every " +
                        std::to_string(kAcceptBackoff.count()) +
                        " ms (raise the open-file limit: LimitNOFILE=, ulimit -n)");
      }
      listening_ = false;
      accept_resume_ = Clock::now() + kAcceptBackoff;
      return false;
    }
    accepted_in_episode_ = true;
    end_accept_episode_locked(Clock::now());
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        (addr.ss_family == AF_INET || addr.ss_family == AF_INET6)) {
      // The end of a response is a few small records: no Nagle delay on them.
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    const uint64_t id = next_id_++;
    conns_.try_emplace(id, Slot{std::make_unique<Conn>(fd, id, reader_limits_)});
    if (!arm(EPOLL_CTL_ADD, fd, id, kConnEvents)) conns_.erase(id);
  }
}

// Closes an out-of-descriptors episode once accepts have worked for kAcceptEpisodeQuiet since
// its last failure (called on each accept and on the workers' tick), with one log line.
void Core::end_accept_episode_locked(Clock::time_point now) {
  if (accept_failures_ == 0 || !accepted_in_episode_) return;
  if (now - last_accept_failure_ < kAcceptEpisodeQuiet) return;
  util::log_info("fcgi: accepting again on " + listen_name_ + " after " +
                 std::to_string(accept_failures_) + " failed accept(s)");
  accept_failures_ = 0;
}

void Core::on_readable(std::unique_ptr<Conn> conn) {
  if (conn->stage == Stage::kWrite) return write_response(std::move(conn));
  const bool open = read_available(*conn, kReadPerEvent);
  // A request read along with the end of the input is answered, and the connection closed
  // after it: no edge would come to say the input ended.
  if (!open || conn->input_closed) conn->reusable = false;
  const RequestReader::Status status = conn->reader.advance();
  std::string& replies = conn->reader.replies();
  if (!replies.empty()) {
    // A few dozen bytes: a peer that does not take them at once is not reading at all.
    const bool written = ::send(conn->fd(), replies.data(), replies.size(), MSG_NOSIGNAL) ==
                         static_cast<ssize_t>(replies.size());
    replies.clear();
    if (!written) {
      util::log_warn("fcgi: closing a connection on " + listen_name_ +
                     " that does not read the answers to its management records");
      return finish(std::move(conn), Then::kClose);
    }
  }
  if (status == RequestReader::Status::kError) {
    util::log_warn("fcgi: closing a connection on " + listen_name_ + ": " + conn->reader.error());
    return finish(std::move(conn), Then::kClose);
  }
  if (status == RequestReader::Status::kComplete) return serve(std::move(conn));
  if (!open || (conn->input_closed && !conn->more_waiting)) {
    // The peer closed (an idle kept connection: the usual end), or failed mid-request.
    return finish(std::move(conn), Then::kClose);
  }
  finish(std::move(conn), Then::kKeep);  // waits for more, under the deadline of its stage
}

void Core::serve(std::unique_ptr<Conn> conn) {
  http::Request request;
  fill_request(conn->reader.envp(), request);
  conn->stage = Stage::kIdle;
  conn->deadline = Clock::time_point::max();

  const bool params_too_large = conn->reader.params_too_large();
  const bool body_too_large = conn->reader.body_too_large();
  if (!params_too_large && !body_too_large) request.body = conn->reader.take_body();
  auto exchange = std::make_shared<Exchange>(shared_from_this(), std::move(conn));
  // Limits found while reading are answered through the app, so the page gets the
  // security headers and an access log line.
  if (params_too_large) {
    return app_.reject(request, 431,
                       "The request headers are larger than " +
                           std::to_string(reader_limits_.max_params_bytes) + " bytes.",
                       exchange);
  }
  if (body_too_large) {
    return app_.reject(request, 413,
                       "The request body is larger than " +
                           std::to_string(reader_limits_.max_body_bytes) + " bytes.",
                       exchange);
  }
  try {
    app_.handle(std::move(request), exchange);
  } catch (const std::exception& e) {
    util::log_error(std::string("fcgi: unhandled exception from the app: ") + e.what());
    if (!exchange->sent()) exchange->send(app_.error_page(500, "Internal error."));
  }
  // Not sent yet: the request is parked; whoever holds the exchange sends later.
  exchange->shrink_parked();
}

}  // namespace fcgi

FcgiServer::FcgiServer(App& app, FcgiOptions options) {
  if (options.threads < 1) throw std::runtime_error("FastCGI: server.threads must be >= 1");
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
