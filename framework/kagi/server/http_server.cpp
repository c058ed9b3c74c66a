#include <kagi/server/http_server.hpp>

#include <signal.h>

// Before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include <kagi/app/app.hpp>
#include <kagi/server/request_reader.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi {
namespace server {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// After an error answer sent with Connection: close, how long the rest of the client's
// request is read and dropped so that closing does not reset the connection before the
// client has read the answer.
constexpr auto kLingerTime = std::chrono::seconds(2);
// After a 400 or 431 the rest is no body worth waiting for (an endless chunk extension,
// say): at most this much of it is read and dropped. After a 413 the client may still be
// sending the refused body, which only kLingerTime bounds, so that it reads the 413.
constexpr size_t kLingerBytesAfterBadRequest = 64 * 1024;
// During a stop, how long a connection that has not sent its first request yet may take
// to send it.
constexpr auto kFirstRequestGrace = std::chrono::milliseconds(1000);
// While a request is parked, the connection is read in pieces this small: enough to see a
// close or the start of the next request.
constexpr size_t kWatchRead = 512;
// Answers to pipelined requests wait in the connection's output until the next request is not
// in the buffer yet, so that a batch of them leaves in one write; never more than this much:
// beyond it the output is written, and beyond it while a write is still out, the next request
// waits for that write (a client that sends but does not read holds no more memory).
constexpr size_t kCoalesceBytes = 64 * 1024;
// An output buffer up to this size is kept for the connection's next answers; a bigger one is
// freed once written.
constexpr size_t kKeptOutputBytes = 4096;
// An answer given while its handler runs is written at once, and that write goes on to the
// next pipelined request: at most this many such requests nest on one stack.
constexpr int kMaxNestedAnswers = 16;
// After a failed accept (out of descriptors), accepting pauses this long, doubling up to
// the maximum while it keeps failing.
constexpr auto kAcceptBackoffMin = std::chrono::milliseconds(50);
constexpr auto kAcceptBackoffMax = std::chrono::milliseconds(1000);

// Appends `n` in decimal.
void append_decimal(std::string& out, uint64_t n) {
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

// Appends `response` as an HTTP/1.1 answer, or 1.0 (its head written here directly: no header
// container built per answer), framed with Content-Length. `head`: the answer to a HEAD, whose
// body the pipeline emptied.
void append_answer(std::string& out, const http::Response& response, bool http10, bool keep_alive,
                   bool head) {
  const int status = response.status;
  out.append(http10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  append_decimal(out, static_cast<uint64_t>(status));
  out.append(" ").append(http::reason_phrase(status)).append("\r\n");
  http::append_fields(out, response, "Content-Length", "Connection");
  // Said only where the version's default differs; an interim answer says nothing of it.
  if (status >= 200 && keep_alive == http10) {
    out.append(keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
  }
  // 1xx, 204 and 304 have no body and no length (RFC 9110 section 8.6).
  const bool bodiless = status < 200 || status == 204 || status == 304;
  const std::optional<std::string_view> stated = response.headers.get("Content-Length");
  if (head && stated && !http::has_line_break(*stated)) {
    // The length of the GET body is only known when the app states it.
    out.append("Content-Length: ").append(*stated).append("\r\n");
  } else if (head ? !response.body.empty() : !bodiless) {
    out.append("Content-Length: ");
    append_decimal(out, response.body.size());
    out.append("\r\n");
  }
  out.append("\r\n");
  if (!head && !bodiless) out.append(response.body);
}

tcp::endpoint parse_endpoint(const std::string& listen) {
  std::string host, port;
  size_t colon;
  if (!listen.empty() && listen[0] == '[') {
    size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      colon = std::string::npos;
    } else {
      host = listen.substr(1, close - 1);
      colon = close + 1;
    }
  } else {
    colon = listen.rfind(':');
    if (colon != std::string::npos) host = listen.substr(0, colon);
  }
  if (colon == std::string::npos || colon + 1 >= listen.size()) {
    throw std::runtime_error("HTTP: bad address '" + listen +
                             "': expected HOST:PORT or [IPv6]:PORT, e.g. 127.0.0.1:8080");
  }
  port = listen.substr(colon + 1);
  unsigned long port_number = 0;
  try {
    size_t used = 0;
    port_number = std::stoul(port, &used);
    if (used != port.size() || port_number > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    throw std::runtime_error("HTTP: bad port in '" + listen + "': expected 0-65535");
  }
  boost::system::error_code ec;
  auto address = net::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) {
    throw std::runtime_error("HTTP: bad address '" + host + "' in '" + listen +
                             "': give a numeric IPv4 or IPv6 address");
  }
  return {address, static_cast<unsigned short>(port_number)};
}

}  // namespace

class Session;

// State shared by the accept loop, the io threads and every session. Sessions and parked
// responders hold it by shared_ptr, so the io_context outlives every socket on it.
class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(App& app, HttpOptions options);
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void run() KAGI_EXCLUDES(mu_);
  void stop() KAGI_EXCLUDES(mu_);

  App& app() { return app_; }
  const HttpOptions& options() const { return options_; }
  bool stopping() const { return stopping_.load(); }
  net::io_context& ioc() { return ioc_; }

  void add_session(const std::shared_ptr<Session>& session) KAGI_EXCLUDES(mu_);
  void remove_session(Session* session) KAGI_EXCLUDES(mu_);
  // Runs `fn` on the io threads unless the server is gone; false if it was dropped.
  bool post(net::any_io_executor executor, std::function<void()> fn) KAGI_EXCLUDES(mu_);

 private:
  void accept();
  // On the acceptor's strand: a Session for `socket`, or a 503 beyond max_connections.
  void admit(tcp::socket socket) KAGI_EXCLUDES(mu_);

  App& app_;
  const HttpOptions options_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer accept_retry_;
  // On the acceptor's strand: the pause after the next failed accept (out of descriptors),
  // and whether accepting is paused or refusing now (each episode is logged once).
  std::chrono::milliseconds accept_backoff_ = kAcceptBackoffMin;
  bool refusing_ = false;
  std::atomic<bool> accept_paused_{false};  // read by remove_session() on any thread
  std::atomic<bool> stopping_{false};

  util::Mutex mu_;
  util::CondVar cv_;  // stop_requested_ set, or sessions_ shrank
  bool stop_requested_ KAGI_GUARDED_BY(mu_) = false;
  bool io_running_ KAGI_GUARDED_BY(mu_) = true;     // posts still reach a running io_context
  bool acceptor_open_ KAGI_GUARDED_BY(mu_) = true;  // may still create sessions
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_ KAGI_GUARDED_BY(mu_);
};

// One client connection; all its handlers run on its strand.
//
// Reading. All bytes go through the connection's RequestReader, whose buffer is bounded
// (request_reader.hpp). At most one read is pending at a time, and the reader's buffer is
// parsed only while none is (a pending read writes into it).
//
// Watching. While a parked request's response is outstanding (its handler returned without
// answering: a long-poll) a read stays pending: an error or a reset means the client left
// (client_gone() turns true and the socket is closed at once); end of stream means it will send
// nothing more (client_gone() turns true; its answer is still written, then the connection closes);
// bytes are the start of a pipelined request and stay buffered for it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Core> core, tcp::socket socket)
      : core_(std::move(core)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        reader_(ReaderLimits{
            .max_header_bytes = core_->app().limits().max_header_bytes,
            .max_body_bytes = static_cast<uint64_t>(core_->app().limits().max_body_bytes)}) {
    boost::system::error_code ec;
    auto peer = socket_.remote_endpoint(ec);
    if (!ec) client_address_ = peer.address().to_string();
  }
  ~Session() { core_->remove_session(this); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() {
    // Answers leave as soon as they are written (a pipelined batch in one write); without this,
    // the next write to a client waits (Nagle) for the ACK of the one before, which the client
    // delays: tens of ms per answer.
    beast::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    core_->add_session(shared_from_this());
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  // On the strand: a stop was requested. An idle connection is closed now; a busy one is
  // closed after its response.
  void on_stop() {
    // Answers still being written are finished first (on_written closes after them).
    if (!idle_ || writing_ || request_started()) return;
    // A kept-alive connection between requests is closed (clients retry on those); a new
    // one gets a moment for its first request, which its client may have sent already.
    if (served_ > 0) return close();
    arm_deadline(
        std::min<std::chrono::milliseconds>(core_->options().idle_timeout, kFirstRequestGrace));
  }

  // From the request's responder on any thread: write `response` on the strand. An answer
  // given by the handler while dispatch() runs it (on this thread, on the strand) is kept for
  // dispatch() to write when the handler returns, without a trip through the strand's queue.
  void deliver(http::Response response) {
    if (dispatching_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
      answered_->emplace(std::move(response));
      return;
    }
    post_write(std::move(response));
  }

  bool gone() const { return gone_.load(); }
  net::any_io_executor strand() { return socket_.get_executor(); }
  // After the io threads have stopped: no handler runs concurrently any more.
  void force_close() { close(); }

 private:
  enum class Phase {
    kHeader,  // reading a request's header block
    kBody,    // reading its body
    kWatch,   // its response is outstanding; watching the socket (see above)
    kLinger,  // an error answer went out; dropping what the client still sends
  };

  // Bytes of a next request have arrived (buffered, or waiting in the socket). Such a
  // connection is not idle: a stop serves that request before closing.
  bool request_started() {
    beast::error_code ec;
    return reader_.buffered() > 0 || socket_.available(ec) > 0;
  }

  // One deadline per phase (a whole header block, a whole body, a write, the linger):
  // reached → the connection is closed. Not per read, so that a client dripping one byte
  // at a time cannot hold a connection longer than the phase's deadline.
  //
  // Moving the deadline is an assignment, not a timer operation per request: the one timer
  // wait of the connection (wait_deadline) wakes at the earliest time it was set for, closes if
  // the deadline has passed, and otherwise waits again for the deadline as it is now. Only a
  // deadline moved earlier than the timer's (a stop's grace, the linger) resets the timer.
  void arm_deadline(std::chrono::milliseconds after) { set_deadline(Clock::now() + after); }
  void disarm_deadline() { set_deadline(Clock::time_point::max()); }
  void set_deadline(Clock::time_point at) {
    deadline_at_ = at;
    if (!timer_waiting_) {
      if (at == Clock::time_point::max()) return;
      deadline_.expires_at(at);
      return wait_deadline();
    }
    // Earlier than the pending wait: that wait is cancelled, and its handler waits again.
    if (at < deadline_.expiry()) deadline_.expires_at(at);
  }
  void wait_deadline() {
    timer_waiting_ = true;
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      self->timer_waiting_ = false;
      if (self->closed_) return;
      if (!ec && self->deadline_at_ <= Clock::now()) return self->close();
      // No deadline (a parked request): no wait either, until set_deadline() starts one.
      if (self->deadline_at_ == Clock::time_point::max()) return;
      // Woken before a deadline that moved later, or reset to an earlier one: wait again.
      if (!ec) self->deadline_.expires_at(self->deadline_at_);
      self->wait_deadline();
    });
  }
  // A parked request may wait long: its connection keeps no timer wait meanwhile (memory per
  // parked request), and its answer's write sets a deadline again.
  void drop_deadline_wait() {
    if (timer_waiting_) deadline_.cancel();
  }

  void read_header() {
    const bool stopping = core_->stopping();
    if (stopping && served_ > 0 && !request_started()) {
      return close_after_output(AfterOutput::kClose);  // answers not written yet still go out
    }
    reader_.next();
    phase_ = Phase::kHeader;
    idle_ = true;
    // During a stop, a connection with no request bytes yet gets only a short grace. One
    // whose request is already here gets the normal timeout: with every io thread busy it
    // may wait longer than the grace for a thread to read it, and it must still be served.
    const bool grace = stopping && !request_started();
    arm_deadline(grace ? std::min<std::chrono::milliseconds>(core_->options().idle_timeout,
                                                             kFirstRequestGrace)
                       : core_->options().idle_timeout);
    if (reading_) {
      // The watch read is still out: take it back, then parse what is buffered (a
      // pipelined request may be complete already, its client waiting for our answer).
      beast::error_code ec;
      socket_.cancel(ec);
      return;
    }
    advance();
  }

  // Parses what is buffered and acts on it. Only while no read is pending.
  void advance() {
    for (;;) {
      switch (reader_.parse()) {
        case RequestReader::Status::kError:
          idle_ = false;
          return fail(reader_.error_status(), reader_.error_message());
        case RequestReader::Status::kDone:
          idle_ = false;
          return dispatch();
        case RequestReader::Status::kHeader:
          idle_ = false;
          phase_ = Phase::kBody;
          arm_deadline(core_->options().idle_timeout);
          if (reader_.expects_continue()) return send_continue();
          continue;
        case RequestReader::Status::kNeedMore:
          // Nothing more to answer until more bytes come: the answers so far leave now (the
          // read and the write run side by side).
          flush();
          return read_more();
      }
    }
  }

  // The interim answer goes into the output like any answer: after the answers queued before
  // it, never in a write of its own beside one in progress.
  void send_continue() {
    http::Response cont;
    cont.status = 100;
    append_answer(out_, cont, reader_.version() == 10, true, false);
    flush();
    advance();
  }

  void read_more() {
    // The client sent all it will: the request stays incomplete. What was answered before it
    // is still written.
    if (eof_) return close_after_output(AfterOutput::kClose);
    auto room = reader_.prepare();
    if (room.size() == 0) {
      // The reader fails a request before its buffer fills; never reached.
      util::log_error("http: read buffer full while a request needs more; closing");
      return close();
    }
    reading_ = true;
    socket_.async_read_some(room, [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_read(ec, n);
    });
  }

  // While the response is outstanding: a read into the room left in the buffer.
  void watch() {
    if (reading_ || eof_ || closed_ || phase_ != Phase::kWatch) return;
    // A small read: it only has to notice a close (or the start of a pipelined request),
    // and a parked request should not hold a full-sized buffer.
    auto room = reader_.prepare(kWatchRead);
    // A client that pipelined a full buffer is not watched further; its next request
    // waits in the buffer.
    if (room.size() == 0) return;
    reading_ = true;
    socket_.async_read_some(room, [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_read(ec, n);
    });
  }

  void on_read(beast::error_code ec, size_t n) {
    reading_ = false;
    reader_.commit(n);
    if (closed_) return;
    if (ec == net::error::eof) {
      eof_ = true;
      gone_ = true;
    }
    switch (phase_) {
      case Phase::kWatch:
        if (ec && !eof_ && ec != net::error::operation_aborted) {
          // Reset or another error: nobody will read the answer.
          gone_ = true;
          return close();
        }
        return watch();
      case Phase::kLinger:
        return;  // linger_close() was not started while a read was pending
      case Phase::kHeader:
      case Phase::kBody:
        // Cancelled by read_header() (a response went out while watching): parse now.
        if (ec && ec != net::error::operation_aborted && !eof_) return close();
        return advance();
    }
  }

  void dispatch();

  // An error answer from the front end itself; the connection closes after it.
  void fail(int status, const std::string& message) {
    close_after_error_ = true;
    linger_budget_ = status == 413 ? SIZE_MAX : kLingerBytesAfterBadRequest;
    write(core_->app().error_page(status, message));
  }

 public:
  void write(http::Response response) {
    if (closed_) return;
    const bool keep_alive =
        !close_after_error_ && !core_->stopping() && reader_.done() && reader_.keep_alive();
    append_answer(out_, response, reader_.version() == 10, keep_alive, head_);
    arm_deadline(core_->options().idle_timeout);
    if (close_after_error_) return close_after_output(AfterOutput::kLinger);
    if (!keep_alive) return close_after_output(AfterOutput::kShutdown);
    if (out_.size() >= kCoalesceBytes) {
      if (writing_) {
        resume_after_write_ = true;  // the next request waits for the socket (see above)
        return;
      }
      flush();
    }
    // The next request may be in the buffer already (pipelining): it is answered before this
    // answer is written, so that both leave in one write. advance() writes them when the
    // buffer holds no complete request, dispatch() when one parks.
    read_header();
  }

 private:
  enum class AfterOutput { kNothing, kClose, kShutdown, kLinger };

  // write() through the strand's queue (from another thread, or to unwind nested answers).
  void post_write(http::Response response) {
    auto self = shared_from_this();
    core_->post(socket_.get_executor(),
                [self, r = std::move(response)]() mutable { self->write(std::move(r)); });
  }

  // Hands what out_ holds to the socket, unless a write is out already (on_written then
  // writes it).
  void flush() {
    if (writing_ || out_.empty() || closed_) return;
    writing_ = true;
    inflight_.swap(out_);
    net::async_write(
        socket_, net::buffer(inflight_),
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_written(ec); });
  }

  void on_written(beast::error_code ec) {
    writing_ = false;
    // The buffer comes back as the next output (flush swaps them): small ones are kept for
    // that, a big one is given back, so an idle connection holds no answer-sized buffer.
    if (inflight_.capacity() > kKeptOutputBytes) {
      std::string().swap(inflight_);
    } else {
      inflight_.clear();
    }
    if (ec) return close();
    if (closed_) return;
    flush();  // what was answered meanwhile
    if (!writing_) {
      switch (after_output_) {
        case AfterOutput::kNothing:
          break;
        case AfterOutput::kClose:
          return close();
        case AfterOutput::kShutdown:
          return shutdown_close();
        case AfterOutput::kLinger:
          return linger_close();
      }
      // A stop came while this was written to an idle connection (on_stop left it to us).
      if (idle_ && served_ > 0 && core_->stopping() && !request_started()) return close();
    }
    if (resume_after_write_ && out_.size() < kCoalesceBytes) {
      resume_after_write_ = false;
      read_header();
    }
  }

  // The connection ends once every answer is written.
  void close_after_output(AfterOutput how) {
    after_output_ = how;
    flush();
    if (!writing_) on_written({});
  }

  void shutdown_close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    close();
  }

  // Reads and drops what the client still sends (the body of a refused request) until it
  // closes, kLingerTime passes or linger_budget_ is spent, then closes. Error answers are written
  // only from advance(), so no read is pending here.
  void linger_close() {
    phase_ = Phase::kLinger;
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (eof_ || reading_) return close();
    arm_deadline(kLingerTime);
    discard_.resize(16384);
    linger_read();
  }
  void linger_read() {
    socket_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec || n >= self->linger_budget_) return self->close();
                              self->linger_budget_ -= n;
                              self->linger_read();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    gone_ = true;
    beast::error_code ec;
    socket_.close(ec);
    deadline_.cancel();
  }

  std::shared_ptr<Core> core_;
  tcp::socket socket_;
  net::steady_timer deadline_;  // expiry: when wait_deadline() next wakes
  Clock::time_point deadline_at_ = Clock::time_point::max();  // when the phase ends
  bool timer_waiting_ = false;  // a wait on deadline_ is out (its handler has not run yet)
  std::string client_address_;
  std::vector<char> discard_;
  // The fields below are touched on the strand only.
  std::atomic<std::thread::id> dispatching_{};         // the thread in dispatch(), while it is
  std::optional<http::Response>* answered_ = nullptr;  // dispatch()'s slot, while it runs
  int nested_answers_ = 0;           // dispatch() → write() → dispatch() depth
  std::string out_;                  // answers not handed to the socket yet
  std::string inflight_;             // the answers of the write that is out
  bool writing_ = false;             // a write of inflight_ is out
  bool resume_after_write_ = false;  // the next request waits for the write (kCoalesceBytes)
  AfterOutput after_output_ = AfterOutput::kNothing;
  RequestReader reader_;
  Phase phase_ = Phase::kHeader;
  bool reading_ = false;  // a read into reader_ is pending
  bool eof_ = false;      // the client shut down its side: no more bytes will come
  bool idle_ = false;     // waiting for the next request's header
  int served_ = 0;        // requests read on this connection
  bool head_ = false;
  bool close_after_error_ = false;
  size_t linger_budget_ = 0;  // bytes linger_close() may still drop
  bool closed_ = false;
  std::atomic<bool> gone_{false};  // read by client_gone() from any thread
};

namespace {

// The Responder of one HTTP request.
class Exchange : public Responder {
 public:
  explicit Exchange(std::shared_ptr<Session> session) : session_(std::move(session)) {}
  ~Exchange() override {
    if (!sent_.exchange(true)) {
      util::log_error("http: a request ended without a response; answering 500");
      session_->deliver(http::Response::text("500 Internal Server Error\n", 500));
    }
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  void send(http::Response response) override {
    if (sent_.exchange(true)) {
      util::log_error("http: a response was sent twice; the second one is dropped");
      return;
    }
    session_->deliver(std::move(response));
  }
  bool client_gone() const override { return session_->gone(); }
  bool sent() const { return sent_.load(); }

 private:
  const std::shared_ptr<Session> session_;
  std::atomic<bool> sent_{false};
};

}  // namespace

void Session::dispatch() {
  ++served_;
  phase_ = Phase::kWatch;
  head_ = reader_.head();
  http::Request request = reader_.take();
  request.client_address = client_address_;
  request.https = false;
  // No deadline while the app works on it: a parked long-poll may legitimately take long.
  disarm_deadline();
  auto exchange = std::make_shared<Exchange>(shared_from_this());
  // Where deliver() puts an answer given during handle(): on this stack, not in the session,
  // which a parked request keeps for as long as it waits.
  std::optional<http::Response> answered;
  answered_ = &answered;
  dispatching_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  try {
    core_->app().handle(std::move(request), exchange);
  } catch (const std::exception& e) {
    util::log_error(std::string("http: unhandled exception from the app: ") + e.what());
    if (!exchange->sent()) exchange->send(core_->app().error_page(500, "Internal error."));
  }
  dispatching_.store(std::thread::id(), std::memory_order_relaxed);
  answered_ = nullptr;
  if (answered) {
    http::Response response = std::move(*answered);
    // Written here, unless requests answered this way are nested deep already (each write
    // goes on to answer the next pipelined request from within this call): then through the
    // strand's queue, which unwinds the stack.
    if (nested_answers_ < kMaxNestedAnswers) {
      ++nested_answers_;
      write(std::move(response));
      --nested_answers_;
      return;
    }
    return post_write(std::move(response));
  }
  // A parked request (no response yet): watch for its client. One answered from another thread
  // meanwhile needs no watch: its answer is already posted behind this handler.
  if (!exchange->sent()) {
    reader_.release_parked();  // parked: hold only what its answer needs
    drop_deadline_wait();
    flush();                   // the answers before it must not wait for it
    std::string().swap(out_);  // empty now: a parked request keeps no output buffer
    watch();
  }
}

Core::Core(App& app, HttpOptions options)
    : app_(app),
      options_(std::move(options)),
      ioc_(options_.threads),
      acceptor_(net::make_strand(ioc_)),
      accept_retry_(acceptor_.get_executor()) {
  tcp::endpoint endpoint = parse_endpoint(options_.listen);
  beast::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw std::runtime_error("HTTP: cannot listen on " + options_.listen + ": " + ec.message() +
                             " (is another process using that port?)");
  }
}

void Core::add_session(const std::shared_ptr<Session>& session) {
  util::MutexLock lock(mu_);
  sessions_.emplace(session.get(), session);
}

void Core::remove_session(Session* session) {
  {
    util::MutexLock lock(mu_);
    sessions_.erase(session);
    // A descriptor came free: try accepting now rather than at the end of the pause.
    if (accept_paused_.load() && io_running_) {
      net::post(accept_retry_.get_executor(), [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->accept_retry_.cancel();
      });
    }
  }
  cv_.notify_all();
}

bool Core::post(net::any_io_executor executor, std::function<void()> fn) {
  util::MutexLock lock(mu_);
  if (!io_running_) {
    util::log_warn("http: a response arrived after the server stopped; dropped");
    return false;
  }
  net::post(executor, std::move(fn));
  return true;
}

void Core::accept() {
  acceptor_.async_accept(
      net::make_strand(ioc_), [self = shared_from_this()](beast::error_code ec, tcp::socket s) {
        // An accepted connection is served even if a stop closed the acceptor meanwhile:
        // its client sent its request before the stop (dropping it lost that request).
        if (!ec) {
          if (self->accept_paused_.exchange(false)) {
            util::log_info("http: accepting connections again on " + self->options_.listen);
          }
          self->accept_backoff_ = kAcceptBackoffMin;
          self->admit(std::move(s));
        }
        if (ec == net::error::operation_aborted || !self->acceptor_.is_open()) return;
        if (ec) {
          // Out of descriptors (EMFILE, ENFILE) or memory: the pending connection stays in
          // the backlog and the listening socket stays readable, so accepting again at once
          // would spin. Pause, longer each time, and keep serving the open connections; a
          // connection that closes resumes accepting at once (remove_session).
          if (!self->accept_paused_.exchange(true)) {
            util::log_error("http: accept on " + self->options_.listen + ": " + ec.message() +
                            "; pausing new connections until one closes (raise the open "
                            "files limit, ulimit -n, or lower server.max_connections)");
          }
          self->accept_retry_.expires_after(self->accept_backoff_);
          self->accept_backoff_ = std::min(self->accept_backoff_ * 2, kAcceptBackoffMax);
          self->accept_retry_.async_wait([self](beast::error_code) { self->accept(); });
          return;
        }
        self->accept();
      });
}

void Core::admit(tcp::socket socket) {
  size_t open;
  {
    util::MutexLock lock(mu_);
    open = sessions_.size();
  }
  if (open < options_.max_connections) {
    refusing_ = false;
    std::make_shared<Session>(shared_from_this(), std::move(socket))->start();
    return;
  }
  if (!refusing_) {
    refusing_ = true;
    util::log_warn("http: " + std::to_string(open) +
                   " connections open (server.max_connections); answering new ones 503");
  }
  // A short answer written at once (a fresh socket's send buffer takes it), whatever the
  // client sent read and dropped so that the close does not reset the answer away.
  http::Response page = app_.error_page(503, "The server has too many open connections.");
  page.headers.set("Retry-After", "1");
  std::string answer;
  append_answer(answer, page, false, false, false);
  beast::error_code ec;
  socket.non_blocking(true, ec);
  net::write(socket, net::buffer(answer), ec);
  char drop[4096];
  for (int i = 0; i < 16 && socket.read_some(net::buffer(drop), ec) > 0 && !ec; ++i) {
  }
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

void Core::stop() {
  {
    util::MutexLock lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

void Core::run() {
  auto work = net::make_work_guard(ioc_);
  accept();
  std::vector<std::thread> threads;
  for (int i = 0; i < options_.threads; ++i) threads.emplace_back([this] { ioc_.run(); });

  std::vector<std::shared_ptr<Session>> live;
  {
    util::MutexLock lock(mu_);
    while (!stop_requested_) cv_.wait(mu_);
    stopping_ = true;
    // On the acceptor's strand, so it never runs beside an accept completion. Connections
    // already waiting in the backlog are taken in: their clients sent a request before the
    // stop, while every thread was busy.
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->acceptor_.cancel(ec);
      self->acceptor_.non_blocking(true, ec);
      for (;;) {
        tcp::socket socket(net::make_strand(self->ioc_));
        self->acceptor_.accept(socket, ec);
        if (ec) break;
        std::make_shared<Session>(self, std::move(socket))->start();
      }
      self->acceptor_.close(ec);
      self->accept_retry_.cancel();
      {
        util::MutexLock lock(self->mu_);
        self->acceptor_open_ = false;
      }
      self->cv_.notify_all();
    });
    for (auto& [ptr, weak] : sessions_) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
  }
  // Released without mu_ held: dropping the last reference runs ~Session, which takes mu_.
  for (auto& session : live) {
    // The executor is the session's strand: on_stop runs serialised with its handlers.
    net::post(session->strand(), [session] { session->on_stop(); });
  }
  live.clear();
  {
    util::MutexLock lock(mu_);
    const auto deadline = Clock::now() + options_.shutdown_timeout;
    while ((acceptor_open_ || !sessions_.empty()) &&
           cv_.wait_until(mu_, deadline) != std::cv_status::timeout) {
    }
    if (acceptor_open_ || !sessions_.empty()) {
      util::log_warn("http: shutdown timeout: " + std::to_string(sessions_.size()) +
                     " connection(s) still busy; closing them");
    }
  }
  work.reset();
  ioc_.stop();
  for (auto& t : threads) t.join();

  // No io thread runs now. Close what is left and let the aborted handlers run once, so
  // they drop their references to the sessions.
  std::vector<std::shared_ptr<Session>> left;
  {
    util::MutexLock lock(mu_);
    io_running_ = false;
    for (auto& [ptr, weak] : sessions_) {
      if (auto session = weak.lock()) left.push_back(session);
    }
  }
  for (auto& session : left) session->force_close();
  left.clear();
  ioc_.restart();
  ioc_.poll();
}

}  // namespace server

HttpServer::HttpServer(App& app, HttpOptions options) {
  if (options.threads < 1) throw std::runtime_error("HTTP: server.threads must be >= 1");
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  core_ = std::make_shared<server::Core>(app, std::move(options));
}

HttpServer::~HttpServer() = default;

void HttpServer::run() { core_->run(); }

void HttpServer::stop() { core_->stop(); }

}  // namespace kagi
