// kagi-lockd's server (lockd/server.hpp). One io_context thread runs the listeners, the
// timers and the signals. The client connections are in an epoll set of the server's own
// (edge-triggered, registered once), which Asio watches as one descriptor: a batch of ready
// connections costs one wake-up, and a command costs one recv() and one send(). Going through
// Asio per connection cost an epoll_ctl() per command (Asio re-arms a descriptor for every
// wait) and a reactor record per socket that Asio keeps in a free list for good: 20,000
// connections left ~20 MB behind after they closed (docs/LOCKD.md, "Performance").
//
// Lines are read into one buffer the whole server shares (only complete lines are served from
// it; a line still arriving is copied into the connection). Writability is watched only while
// a client does not read its answers.
#include <kagi/lockd/server.hpp>

#include <arpa/inet.h>
#include <grp.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sys/epoll.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <kagi/lockd/protocol.hpp>
#include <kagi/lockd/table.hpp>
#include <kagi/util/endpoint.hpp>
#include <kagi/util/json.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/random.hpp>

namespace kagi::lockd {
namespace {

namespace asio = boost::asio;
using Claim = KeyTable::Claim;
using std::chrono::milliseconds;

constexpr size_t kReadBuffer = 64 * 1024;
// Reads of one connection per turn of the event loop: a client that sends without pause gets
// 256 KiB served, then waits for everyone else's turn (edge-triggered: the server keeps a list
// of those with more to read, since no new event will say so).
constexpr int kReadsPerTurn = 4;
// Answers a connection may have waiting to be sent before its next lines wait too: a client
// that pipelines STATUS and never reads costs this much (plus one answer), not a copy of the
// table per line.
constexpr size_t kOutputCap = 256 * 1024;
constexpr size_t kAcceptBatch = 256;
constexpr int kEventBatch = 256;
constexpr uint32_t kReadEvents = EPOLLIN | EPOLLRDHUP | EPOLLET;
// Connections closed since the last malloc_trim() before the next one: memory a burst of
// connections took goes back to the system once they are gone.
constexpr size_t kTrimAfterCloses = 1024;
// And once a burst is over (a sweep saw no close since the previous sweep), at least this many
// closes since the last trim: the tail of a burst, or a burst smaller than kTrimAfterCloses,
// would otherwise keep its memory until the next one. Fewer are not worth a trim's walk.
constexpr size_t kTrimWhenQuietAfter = 64;

// An allowed network: family, address bytes, prefix length.
struct Network {
  int family = AF_INET;
  unsigned char bytes[16] = {};
  int prefix = 0;

  bool contains(const sockaddr* addr) const {
    const unsigned char* a = nullptr;
    int len = 0;
    unsigned char mapped[4];
    if (addr->sa_family == AF_INET) {
      a = reinterpret_cast<const unsigned char*>(
          &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr);
      len = 4;
    } else if (addr->sa_family == AF_INET6) {
      const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
      if (family == AF_INET && IN6_IS_ADDR_V4MAPPED(&v6)) {
        std::memcpy(mapped, v6.s6_addr + 12, 4);
        a = mapped;
        len = 4;
      } else {
        a = v6.s6_addr;
        len = 16;
      }
    }
    if (!a || (len == 4) != (family == AF_INET)) return false;
    int bits = prefix;
    for (int i = 0; i < len && bits > 0; ++i, bits -= 8) {
      const unsigned mask = bits >= 8 ? 0xffu : (0xffu << (8 - bits)) & 0xffu;
      if ((a[i] & mask) != (bytes[i] & mask)) return false;
    }
    return true;
  }
};

Network parse_network(const std::string& text) {
  Network n;
  const size_t slash = text.find('/');
  const std::string host = text.substr(0, slash);
  if (inet_pton(AF_INET, host.c_str(), n.bytes) == 1) {
    n.family = AF_INET;
    n.prefix = 32;
  } else if (inet_pton(AF_INET6, host.c_str(), n.bytes) == 1) {
    n.family = AF_INET6;
    n.prefix = 128;
  } else {
    throw std::invalid_argument("lockd.allow: '" + text +
                                "' is not an IP address or network (e.g. 10.1.0.0/16)");
  }
  if (slash != std::string::npos) {
    const std::string bits = text.substr(slash + 1);
    int value = -1;
    const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), value);
    if (bits.empty() || ec != std::errc() || end != bits.data() + bits.size() || value < 0 ||
        value > n.prefix) {
      throw std::invalid_argument("lockd.allow: '" + text + "' has a bad prefix length");
    }
    n.prefix = value;
  }
  return n;
}

void append_number(std::string& out, uint64_t value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

int64_t ms_since(Clock::time_point then, Clock::time_point now) {
  return std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(now - then).count());
}

}  // namespace

class Connection;

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& io, ServerOptions options);

  void start();
  void stop();
  std::vector<std::string> addresses() const;
  ServerStats stats() const;

  // What connections use.
  asio::io_context& io() { return io_; }
  const ServerOptions& options() const { return o_; }
  const ParseLimits& limits() const { return limits_; }
  KeyTable& table() { return table_; }
  Command& command() { return command_; }
  char* read_buffer() { return read_buffer_.data(); }
  void link(Connection* c);
  void unlink(Connection* c, const std::string& address_key);
  void write_status(std::string& out);
  bool stopping() const { return stopping_; }
  int epoll_fd() const { return epfd_; }
  // A closed connection stays allocated until the batch of events that may name it is done.
  void bury(std::shared_ptr<Connection> c) { graveyard_.push_back(std::move(c)); }
  // `c` stopped reading after its turn with bytes possibly left: it reads again after the
  // events that are ready now.
  void read_later(std::shared_ptr<Connection> c) { read_later_.push_back(std::move(c)); }

 private:
  struct Listener {
    std::string address;
    std::string path;  // a unix socket this server made (removed at stop)
    std::unique_ptr<asio::ip::tcp::acceptor> tcp;
    std::unique_ptr<asio::local::stream_protocol::acceptor> local;
    int fd() const { return tcp ? tcp->native_handle() : local->native_handle(); }
  };

  void listen(const std::string& address);
  // Gives the unix socket at `path` the group lockd.socket_group; throws (removing it) if not.
  void give_group(const std::string& address, const std::string& path) const;
  void arm_accept(Listener& l);
  void accept_ready(Listener& l);
  void admit(int fd, const sockaddr_storage& addr, socklen_t len);
  void refuse(int fd, const std::string& why);
  // Forgets one connection of `address_key` (empty: a local peer's).
  void uncount(const std::string& address_key);
  void arm_sweep();
  void sweep();
  void arm_poll();
  void poll_once();

  asio::io_context& io_;
  const ServerOptions o_;
  const ParseLimits limits_;
  std::vector<Network> allow_;
  KeyTable table_;
  Command command_;  // reused by every line
  std::vector<char> read_buffer_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  const int epfd_;
  asio::posix::stream_descriptor poll_;  // epfd_, as Asio sees it
  std::vector<std::shared_ptr<Connection>> graveyard_;
  std::vector<std::shared_ptr<Connection>> read_later_;
  asio::steady_timer sweep_timer_;
  asio::steady_timer accept_pause_;
  bool stopping_ = false;
  bool accept_paused_ = false;
  Connection* head_ = nullptr;  // every open connection (intrusive list)
  size_t connections_ = 0;
  std::unordered_map<std::string, size_t> per_address_;  // connections per remote address
  size_t local_connections_ = 0;                         // from loopback and unix sockets
  uint64_t accepted_ = 0, refused_ = 0;
  size_t closed_since_trim_ = 0;
  size_t closed_at_last_sweep_ = 0;  // closed_since_trim_ when the previous sweep ended
};

// One client connection: owned by itself while open (self_), then by the server until the
// batch of events that may name it is done, and by a pending wait timer.
class Connection final : public KeyTable::Owner, public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerCore& server, int fd, std::string peer, std::string address_key, bool needs_auth)
      : s_(server),
        fd_(fd),
        peer_(std::move(peer)),
        address_key_(std::move(address_key)),
        authed_(!needs_auth) {}

  // Joins the server's epoll set; false if it cannot (the caller closes the socket).
  bool start(Clock::time_point now) {
    epoll_event ev{};
    ev.events = kReadEvents;
    ev.data.ptr = this;
    if (::epoll_ctl(s_.epoll_fd(), EPOLL_CTL_ADD, fd_, &ev) != 0) return false;
    self_ = shared_from_this();
    last_active_ = now;
    return true;
  }

  void on_event(uint32_t events) {
    if (closed_) return;
    // Sticky: the FIN may come in the same event as the last line (edge-triggered: no event
    // will say it again), or while reading is paused; from now on reads go on until recv()
    // says end of file or EAGAIN, never stopping at a short read.
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) peer_eof_ = true;
    if (write_armed_ && (events & (EPOLLHUP | EPOLLERR))) {
      close();  // gone both ways: the answers held back can never be delivered
      return;
    }
    if (events & EPOLLOUT) {
      on_writable();
      return;
    }
    on_readable();
  }

  const std::string& peer() const { return peer_; }
  const std::string& label() const { return label_; }
  Connection* prev = nullptr;
  Connection* next = nullptr;

  // Idle and line deadlines, checked by the server's sweep.
  void sweep(Clock::time_point now) {
    if (closed_) return;
    const ServerOptions& o = s_.options();
    // (Not while the client's answers are held back: the rest of its line may be unread.)
    if (!partial_.empty() && !write_armed_ &&
        now - line_started_ > milliseconds(o.line_timeout_ms)) {
      fail("line timeout: a line must end within " + std::to_string(o.line_timeout_ms) + " ms");
    } else if (o.idle_timeout_ms > 0 && held_.empty() && !wait_ && partial_.empty() &&
               out_sent_ == out_.size() && now - last_active_ > milliseconds(o.idle_timeout_ms)) {
      fail("idle timeout: nothing held and nothing sent for " + std::to_string(o.idle_timeout_ms) +
           " ms");
    }
  }

  // Closes without a word: releases everything held or waited for.
  void close() {
    if (closed_) return;
    closed_ = true;
    const Clock::time_point now = Clock::now();
    if (wait_) abandon_wait(now);
    for (Claim* c : held_) s_.table().release(c, now);
    held_.clear();
    ::close(fd_);  // leaves the epoll set too
    s_.unlink(this, address_key_);
    s_.bury(std::move(self_));
  }

  void on_granted(Claim& claim) override {
    (void)claim;  // the claim the wait is blocked on: wait_->claims[wait_->next]
    if (closed_ || !wait_) return;
    ++wait_->next;
    continue_wait(Clock::now());
    pump();
  }

  // Reads until the socket is drained (edge-triggered: the next event comes with new bytes or
  // the FIN), serving each line as it comes, or until kReadsPerTurn reads, or until the client
  // stops taking its answers (reading resumes in on_writable).
  void on_readable() {
    if (closed_ || write_armed_) return;
    char* buf = s_.read_buffer();
    for (int reads = 0;; ++reads) {
      if (reads == kReadsPerTurn) {
        s_.read_later(shared_from_this());  // more may be there: after the others' turn
        return;
      }
      const ssize_t n = ::recv(fd_, buf, kReadBuffer, 0);
      if (n > 0) {
        last_active_ = Clock::now();
        feed(buf, static_cast<size_t>(n));
        pump();
        if (closed_ || write_armed_) return;
        // Drained, unless the FIN is known to be there: then read on until recv() says so.
        if (static_cast<size_t>(n) < kReadBuffer && !peer_eof_) return;
        continue;
      }
      if (n == 0) {  // close or half-close: the seed releases on either
        close();
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      close();
      return;
    }
  }

  // Bytes of answers not sent yet.
  size_t pending_output() const { return out_.size() - out_sent_; }

 private:
  // A command waiting for its locks: its keys (copied: the line is gone), their modes, and
  // the canonical order they are taken in; claims[i] is the claim of order[i].
  struct Wait {
    Verb verb = Verb::kLock;
    bool seed_form = false;
    std::vector<std::string> keys;
    std::vector<Mode> modes;
    std::vector<size_t> order;
    std::vector<Claim*> claims;  // taken so far, in canonical order; the last may be queued
    size_t next = 0;             // claims[0..next) are granted
    int64_t timeout_ms = -1;
    uint64_t serial = 0;
    std::optional<asio::steady_timer> timer;
  };

  // The client does not take its answers: watch for room, stop reading meanwhile.
  void arm_write() {
    epoll_event ev{};
    ev.events = kReadEvents | EPOLLOUT;
    ev.data.ptr = this;
    if (::epoll_ctl(s_.epoll_fd(), EPOLL_CTL_MOD, fd_, &ev) != 0) {
      close();
      return;
    }
    write_armed_ = true;
  }

  void on_writable() {
    epoll_event ev{};
    ev.events = kReadEvents;
    ev.data.ptr = this;
    (void)::epoll_ctl(s_.epoll_fd(), EPOLL_CTL_MOD, fd_, &ev);
    write_armed_ = false;
    pump();
    // Reading stopped while the answers piled up: read what came meanwhile.
    if (!closed_ && !write_armed_) on_readable();
  }

  void flush() {
    while (out_sent_ < out_.size()) {
      const ssize_t n = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
      if (n > 0) {
        out_sent_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!write_armed_) arm_write();
        return;
      }
      close();
      return;
    }
    out_sent_ = 0;
    out_.clear();
    if (out_.capacity() > 64 * 1024) out_.shrink_to_fit();  // after a large STATUS
  }

  // Lines are served only while fewer than kOutputCap bytes of answers wait to be sent, and
  // after the lines queued before them.
  bool may_serve() const { return pending_output() < kOutputCap && queued_head_ == queued_.size(); }

  // Serves what was held back — lines queued during a wait, then input set aside while
  // answers piled up — as far as the output cap allows, and sends the answers; again while
  // the client takes them. Returns when everything is served, a wait is pending (later lines
  // are queued behind it), the connection closed, or the client does not read (write_armed_).
  void pump() {
    for (;;) {
      run_queued();
      if (!closed_ && !unread_.empty() && (wait_ || may_serve())) {
        const std::string rest = std::move(unread_);
        unread_.clear();
        feed(rest.data(), rest.size());
      }
      if (closed_) return;
      flush();
      if (closed_ || write_armed_) return;
      if (wait_ || (queued_head_ == queued_.size() && unread_.empty())) return;
    }
  }

  // Splits what arrived into lines and serves them; the bytes after the last '\n' wait in
  // partial_. What may not be served yet (the output cap) is kept in unread_ (at most one
  // read: reading stops until it is served).
  void feed(const char* data, size_t size) {
    const size_t max = s_.options().max_line_bytes;
    while (size > 0 && !closed_) {
      if (!wait_ && !may_serve()) {
        unread_.assign(data, size);
        return;
      }
      const char* nl = static_cast<const char*>(std::memchr(data, '\n', size));
      if (!nl) {
        if (partial_.empty()) line_started_ = Clock::now();
        if (partial_.size() + size > max) {
          fail("line too long (at most " + std::to_string(max) + " bytes)");
          return;
        }
        partial_.append(data, size);
        return;
      }
      const size_t len = static_cast<size_t>(nl - data);
      if (partial_.size() + len > max) {
        fail("line too long (at most " + std::to_string(max) + " bytes)");
        return;
      }
      if (partial_.empty()) {
        on_line(std::string_view(data, len));
      } else {
        partial_.append(data, len);
        std::string line = std::move(partial_);
        partial_.clear();
        on_line(line);
      }
      data = nl + 1;
      size -= len + 1;
    }
  }

  void on_line(std::string_view line) {
    if (wait_) {  // served after the wait ends, in order
      if (queued_.size() - queued_head_ >= s_.options().max_queued_lines) {
        fail("too many lines sent while waiting (at most " +
             std::to_string(s_.options().max_queued_lines) + ")");
        return;
      }
      queued_.emplace_back(line);
      return;
    }
    serve(line);
  }

  // Serves the queued lines in order until a new wait begins or the answers reach the cap.
  void run_queued() {
    while (!wait_ && !closed_ && queued_head_ < queued_.size() && pending_output() < kOutputCap) {
      const std::string line = std::move(queued_[queued_head_++]);
      serve(line);
    }
    if (queued_head_ == queued_.size()) {
      queued_.clear();
      queued_head_ = 0;
    }
  }

  void reply(std::string_view text) {
    out_ += text;
    out_ += '\n';
  }

  // "error <why>", then close (everything held is released).
  void fail(const std::string& why) {
    if (closed_) return;
    out_ += "error ";
    out_ += why;
    out_ += '\n';
    // Best effort: the answer is small and the socket buffer nearly always takes it. Unread
    // bytes would turn the close into a reset that can discard it at the client, so read
    // what is there first.
    (void)::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_,
                 MSG_NOSIGNAL | MSG_DONTWAIT);
    char sink[4096];
    for (int i = 0; i < 16; ++i) {
      if (::recv(fd_, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
    }
    ::shutdown(fd_, SHUT_WR);
    close();
  }

  Claim* held_claim(std::string_view key) const {
    for (Claim* c : held_) {
      if (c->key->name == key) return c;
    }
    return nullptr;
  }

  void serve(std::string_view line) {
    Command& cmd = s_.command();
    std::string why;
    if (!parse_line(line, s_.limits(), cmd, &why)) {
      if (seed_claim_) {
        close();  // the seed: any further line releases and closes
        return;
      }
      fail(why);
      return;
    }
    if (seed_claim_ && cmd.verb != Verb::kUnlock) {
      close();  // UNLOCK keeps the connection; unlock() ends the seed's rules with its key
      return;
    }
    if (!authed_ && cmd.verb != Verb::kAuth) {
      fail("auth required: send AUTH <secret> first (lockd.secret_file)");
      return;
    }
    switch (cmd.verb) {
      case Verb::kPing:
        reply("pong");
        return;
      case Verb::kAuth:
        if (!s_.options().secret.empty() &&
            !util::constant_time_equal(cmd.text, s_.options().secret)) {
          fail("bad secret");
          return;
        }
        authed_ = true;
        reply("ok");
        return;
      case Verb::kClient:
        label_.assign(cmd.text);
        reply("ok");
        return;
      case Verb::kStatus:
        s_.write_status(out_);
        return;
      case Verb::kVerify: {
        const Claim* c = held_claim(cmd.keys[0]);
        reply(c && c->token == cmd.token ? "ok" : "lost");
        return;
      }
      case Verb::kUnlock:
        unlock(cmd);
        return;
      case Verb::kLock:
      case Verb::kShared:
      case Verb::kLockSet:
        begin_wait(cmd);
        return;
    }
  }

  void unlock(const Command& cmd) {
    const Clock::time_point now = Clock::now();
    if (cmd.keys.empty()) {
      for (Claim* c : held_) s_.table().release(c, now);
      held_.clear();
      seed_claim_ = nullptr;
      reply("ok");
      return;
    }
    for (size_t i = 0; i < held_.size(); ++i) {
      if (held_[i]->key->name == cmd.keys[0]) {
        if (held_[i] == seed_claim_) seed_claim_ = nullptr;
        s_.table().release(held_[i], now);
        held_[i] = held_.back();
        held_.pop_back();
        reply("ok");
        return;
      }
    }
    fail("not held: this connection does not hold that key");
  }

  void begin_wait(const Command& cmd) {
    const size_t max = s_.options().max_keys_per_connection;
    if (held_.size() + cmd.keys.size() > max) {
      fail("too many keys: a connection holds at most " + std::to_string(max));
      return;
    }
    for (std::string_view key : cmd.keys) {
      if (held_claim(key)) {
        fail("already held by this connection: " + std::string(key) + " (it would wait on itself)");
        return;
      }
    }
    const Clock::time_point now = Clock::now();
    // The common case first: one key, granted at once, no Wait record at all.
    if (cmd.keys.size() == 1) {
      Claim* c = s_.table().request(cmd.keys[0], cmd.modes[0], *this, now);
      if (c->granted) {
        held_.push_back(c);
        grant_reply(cmd.seed_form, &c, 1, nullptr);
        return;
      }
      if (cmd.timeout_ms == 0) {
        s_.table().release(c, now);
        reply("busy");
        return;
      }
      auto w = new_wait(cmd);
      w->order = {0};
      w->claims = {c};
      w->next = 0;
      wait_ = std::move(w);
      arm_timer();
      return;
    }
    auto w = new_wait(cmd);
    w->order.resize(cmd.keys.size());
    std::iota(w->order.begin(), w->order.end(), size_t{0});
    std::sort(w->order.begin(), w->order.end(),
              [&](size_t a, size_t b) { return w->keys[a] < w->keys[b]; });
    wait_ = std::move(w);
    continue_wait(now);
    if (wait_) arm_timer();
  }

  std::unique_ptr<Wait> new_wait(const Command& cmd) {
    auto w = std::make_unique<Wait>();
    w->verb = cmd.verb;
    w->seed_form = cmd.seed_form;
    w->keys.assign(cmd.keys.begin(), cmd.keys.end());
    w->modes = cmd.modes;
    w->timeout_ms = cmd.timeout_ms;
    w->serial = ++wait_serial_;
    return w;
  }

  // Takes the set's keys in canonical order from wait_->next on, until one has to wait, or
  // all are held (the answer is sent and wait_ ends), or a try fails ("busy").
  void continue_wait(Clock::time_point now) {
    Wait& w = *wait_;
    while (w.next < w.order.size()) {
      if (w.claims.size() == w.next) {
        const size_t i = w.order[w.next];
        w.claims.push_back(s_.table().request(w.keys[i], w.modes[i], *this, now));
      }
      if (!w.claims[w.next]->granted) {
        if (w.timeout_ms == 0) {
          abandon_wait(now);
          reply("busy");
        }
        return;
      }
      ++w.next;
    }
    // Everything is held: the answer lists the tokens in the order the keys were given.
    std::vector<Claim*> given(w.order.size());
    for (size_t k = 0; k < w.order.size(); ++k) given[w.order[k]] = w.claims[k];
    for (Claim* c : given) held_.push_back(c);
    const bool seed = w.seed_form;
    std::unique_ptr<Wait> done = std::move(wait_);
    grant_reply(seed, given.data(), given.size(), &done);
  }

  void grant_reply(bool seed_form, Claim* const* claims, size_t n, std::unique_ptr<Wait>* done) {
    if (done && *done && (*done)->timer) (*done)->timer->cancel();
    if (seed_form) {
      seed_claim_ = claims[0];
      reply("ok");
      return;
    }
    out_ += "ok";
    for (size_t i = 0; i < n; ++i) {
      out_ += ' ';
      append_number(out_, claims[i]->token);
    }
    out_ += '\n';
  }

  void arm_timer() {
    Wait& w = *wait_;
    if (w.timeout_ms <= 0) return;  // no bound (the seed's LOCK); 0 never gets here
    w.timer.emplace(s_.io());
    w.timer->expires_after(milliseconds(w.timeout_ms));
    w.timer->async_wait(
        [self = shared_from_this(), serial = w.serial](const boost::system::error_code& ec) {
          if (ec || self->closed_ || !self->wait_ || self->wait_->serial != serial) return;
          self->abandon_wait(Clock::now());
          self->reply("busy");
          self->pump();
          self->s_.table().run_ready();
        });
  }

  // Gives up the wait in progress: everything it took or queued for is released.
  void abandon_wait(Clock::time_point now) {
    std::unique_ptr<Wait> w = std::move(wait_);
    if (w->timer) w->timer->cancel();
    for (Claim* c : w->claims) s_.table().release(c, now);
  }

  ServerCore& s_;
  const int fd_;
  std::shared_ptr<Connection> self_;
  const std::string peer_;
  const std::string address_key_;
  std::string label_;
  std::string partial_;
  std::string unread_;  // input not served yet: the answers before it wait to be sent
  std::string out_;
  size_t out_sent_ = 0;
  std::vector<Claim*> held_;
  std::unique_ptr<Wait> wait_;
  std::vector<std::string> queued_;
  size_t queued_head_ = 0;
  uint64_t wait_serial_ = 0;
  Clock::time_point line_started_, last_active_;
  bool authed_;
  // The key granted by the seed's bare LOCK, while held: any line but UNLOCK closes.
  Claim* seed_claim_ = nullptr;
  bool write_armed_ = false;
  bool peer_eof_ = false;  // the client's FIN (or a reset) is in the socket
  bool closed_ = false;
};

ServerCore::ServerCore(asio::io_context& io, ServerOptions options)
    : io_(io),
      o_(std::move(options)),
      limits_{o_.max_key_bytes, o_.max_keys_per_connection, 512},
      table_(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count())),
      read_buffer_(kReadBuffer),
      epfd_(::epoll_create1(EPOLL_CLOEXEC)),
      poll_(io),
      sweep_timer_(io),
      accept_pause_(io) {
  if (epfd_ < 0) throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
  poll_.assign(epfd_);
  for (const std::string& a : o_.allow) allow_.push_back(parse_network(a));
  if (o_.listen.empty()) throw std::invalid_argument("lockd.listen is empty: nothing to listen on");
  for (const std::string& a : o_.listen) {
    util::Endpoint ep;
    std::string why;
    if (!util::parse_endpoint(a, ep, &why)) throw std::invalid_argument("lockd.listen: " + why);
  }
}

void ServerCore::start() {
  for (const std::string& a : o_.listen) listen(a);
  arm_sweep();
  arm_poll();
}

void ServerCore::arm_poll() {
  if (!read_later_.empty()) {  // their turn comes without an event: let other handlers run first
    asio::post(io_, [self = shared_from_this()] {
      if (self->stopping_) return;
      self->poll_once();
      self->arm_poll();
    });
    return;
  }
  poll_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [self = shared_from_this()](const boost::system::error_code& ec) {
                     if (ec || self->stopping_) return;
                     self->poll_once();
                     self->arm_poll();
                   });
}

void ServerCore::poll_once() {
  epoll_event events[kEventBatch];
  const int n = ::epoll_wait(epfd_, events, kEventBatch, 0);
  for (int i = 0; i < n; ++i) {
    static_cast<Connection*>(events[i].data.ptr)->on_event(events[i].events);
  }
  std::vector<std::shared_ptr<Connection>> again;
  again.swap(read_later_);
  for (const auto& c : again) c->on_readable();
  table_.run_ready();
  graveyard_.clear();
}

void ServerCore::listen(const std::string& address) {
  util::Endpoint ep;
  std::string why;
  util::parse_endpoint(address, ep, &why);
  auto l = std::make_unique<Listener>();
  l->address = address;
  boost::system::error_code ec;
  if (ep.is_unix) {
    // A socket file left by a server that died: nobody answers on it, so it may go. One that
    // answers belongs to a running server: refuse to take its place.
    if (::access(ep.path.c_str(), F_OK) == 0) {
      const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const bool live = probe >= 0 && ::connect(probe, ep.sockaddr_ptr(), ep.sockaddr_len()) == 0;
      if (probe >= 0) ::close(probe);
      if (live) {
        throw std::runtime_error("cannot listen on " + address +
                                 ": another server answers there (stop it first)");
      }
      ::unlink(ep.path.c_str());
    }
    l->local = std::make_unique<asio::local::stream_protocol::acceptor>(io_);
    l->local->open(asio::local::stream_protocol(), ec);
    // The socket gets its mode as it appears: no moment with the umask's mode.
    const mode_t old = ::umask(static_cast<mode_t>(~o_.socket_mode & 0777));
    if (!ec) l->local->bind(asio::local::stream_protocol::endpoint(ep.path), ec);
    ::umask(old);
    if (!ec) l->path = ep.path;
    // Its group before it listens: nobody outside that group can connect in between.
    if (!ec && !o_.socket_group.empty()) give_group(address, ep.path);
    if (!ec) l->local->listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) l->local->non_blocking(true, ec);
  } else {
    l->tcp = std::make_unique<asio::ip::tcp::acceptor>(io_);
    asio::ip::tcp::endpoint endpoint;
    endpoint.resize(ep.addr_len);
    std::memcpy(endpoint.data(), &ep.addr, ep.addr_len);
    l->tcp->open(endpoint.protocol(), ec);
    if (!ec) l->tcp->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) l->tcp->bind(endpoint, ec);
    if (!ec) l->tcp->listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) l->tcp->non_blocking(true, ec);
  }
  if (ec) {
    throw std::runtime_error("cannot listen on " + address + ": " + ec.message() +
                             (ec == asio::error::access_denied
                                  ? " (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
                                  : ""));
  }
  Listener& ref = *l;
  listeners_.push_back(std::move(l));
  arm_accept(ref);
}

void ServerCore::give_group(const std::string& address, const std::string& path) const {
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  const int err = ::getgrnam_r(o_.socket_group.c_str(), &g, buf.data(), buf.size(), &found);
  if (!found) {
    ::unlink(path.c_str());
    throw std::runtime_error("cannot listen on " + address + ": lockd.socket_group '" +
                             o_.socket_group + "' " +
                             (err ? std::string("cannot be looked up: ") + std::strerror(err)
                                  : std::string("is not a group")));
  }
  if (::chown(path.c_str(), static_cast<uid_t>(-1), g.gr_gid) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    throw std::runtime_error("cannot listen on " + address + ": cannot give the socket group '" +
                             o_.socket_group + "': " + std::strerror(e) +
                             " (kagi-lockd's user must be a member: SupplementaryGroups= in "
                             "its systemd unit)");
  }
}

void ServerCore::arm_accept(Listener& l) {
  auto handler = [self = shared_from_this(), &l](const boost::system::error_code& ec) {
    if (ec || self->stopping_) return;
    self->accept_ready(l);
  };
  if (l.tcp) {
    l.tcp->async_wait(asio::socket_base::wait_read, handler);
  } else {
    l.local->async_wait(asio::socket_base::wait_read, handler);
  }
}

void ServerCore::accept_ready(Listener& l) {
  for (size_t i = 0; i < kAcceptBatch; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd =
        ::accept4(l.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd, addr, len);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      arm_accept(l);
      return;
    }
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      // Out of descriptors: waiting clients stay in the backlog until some close.
      if (!accept_paused_) {
        util::log_warn("lockd: out of file descriptors at " + std::to_string(connections_) +
                       " connections (" + std::strerror(errno) +
                       "); accepting again in 100 ms (raise LimitNOFILE / ulimit -n)");
      }
      accept_paused_ = true;
      accept_pause_.expires_after(milliseconds(100));
      accept_pause_.async_wait(
          [self = shared_from_this(), &l](const boost::system::error_code& ec) {
            if (ec || self->stopping_) return;
            self->accept_paused_ = false;
            self->accept_ready(l);
          });
      return;
    }
    util::log_error("lockd: accept on " + l.address + ": " + std::strerror(errno));
    arm_accept(l);
    return;
  }
  // A full batch: let other work run, then accept on (the edge will not come again).
  asio::post(io_, [self = shared_from_this(), &l] {
    if (!self->stopping_) self->accept_ready(l);
  });
}

void ServerCore::refuse(int fd, const std::string& why) {
  ++refused_;
  const std::string line = "error " + why + "\n";
  (void)::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // A close with unread bytes (a client that sent its command at once) is a reset, which can
  // discard the error line at the client: read what is there first, as fail() does.
  char sink[4096];
  for (int i = 0; i < 16; ++i) {
    if (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

void ServerCore::admit(int fd, const sockaddr_storage& storage, socklen_t len) {
  const auto* addr = reinterpret_cast<const sockaddr*>(&storage);
  const bool is_unix = addr->sa_family == AF_UNIX;
  const bool loopback = is_unix || util::is_loopback(addr);
  std::string address_key = util::endpoint_host(addr, len);
  std::string peer;
  if (is_unix) {
    ucred cred{};
    socklen_t cl = sizeof cred;
    peer = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0
               ? "unix pid " + std::to_string(cred.pid)
               : std::string("unix");
  } else {
    peer = util::endpoint_text(addr, len);
  }
  if (!loopback && std::none_of(allow_.begin(), allow_.end(),
                                [&](const Network& n) { return n.contains(addr); })) {
    refuse(fd, "not allowed: " + address_key + " is not in lockd.allow");
    return;
  }
  if (connections_ >= o_.max_connections) {
    refuse(fd, "too many connections (lockd.max_connections = " +
                   std::to_string(o_.max_connections) + ")");
    return;
  }
  if (loopback) {
    // This host's clients share an address (or have none): the per-address cap would bound
    // a one-host site's connections, so they have their own (none by default).
    if (o_.max_local_connections > 0 && local_connections_ >= o_.max_local_connections) {
      refuse(fd, "too many connections from this host (lockd.max_local_connections = " +
                     std::to_string(o_.max_local_connections) + ")");
      return;
    }
    ++local_connections_;
    address_key.clear();  // counted as local
  } else {
    size_t& from_here = per_address_[address_key];
    if (from_here >= o_.max_connections_per_address) {
      if (from_here == 0) per_address_.erase(address_key);
      refuse(fd, "too many connections from " + address_key +
                     " (lockd.max_connections_per_address = " +
                     std::to_string(o_.max_connections_per_address) + ")");
      return;
    }
    ++from_here;
  }
  if (!is_unix) {
    const int one = 1;
    const int idle = o_.keepalive_idle_s, interval = o_.keepalive_interval_s;
    const int count = o_.keepalive_count;
    const unsigned user_timeout = static_cast<unsigned>(o_.user_timeout_ms);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  }
  ++accepted_;
  // A secret guards peers from other hosts; loopback and unix peers are this host's.
  const bool needs_auth = !o_.secret.empty() && !loopback;
  auto c = std::make_shared<Connection>(*this, fd, std::move(peer), address_key, needs_auth);
  if (!c->start(Clock::now())) {
    util::log_error(std::string("lockd: cannot watch a new connection: epoll_ctl: ") +
                    std::strerror(errno));
    ::close(fd);
    uncount(address_key);
    return;
  }
  link(c.get());
}

void ServerCore::link(Connection* c) {
  c->prev = nullptr;
  c->next = head_;
  if (head_) head_->prev = c;
  head_ = c;
  ++connections_;
}

void ServerCore::unlink(Connection* c, const std::string& address_key) {
  (c->prev ? c->prev->next : head_) = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = nullptr;
  --connections_;
  uncount(address_key);
  ++closed_since_trim_;
}

void ServerCore::uncount(const std::string& address_key) {
  if (address_key.empty()) {
    --local_connections_;
  } else if (auto it = per_address_.find(address_key);
             it != per_address_.end() && --it->second == 0) {
    per_address_.erase(it);
  }
}

void ServerCore::arm_sweep() {
  int interval = o_.line_timeout_ms;
  if (o_.idle_timeout_ms > 0) interval = std::min(interval, o_.idle_timeout_ms);
  interval = std::clamp(interval / 4, 25, 1000);
  sweep_timer_.expires_after(milliseconds(interval));
  sweep_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->stopping_) return;
    self->sweep();
    self->arm_sweep();
  });
}

void ServerCore::sweep() {
  const Clock::time_point now = Clock::now();
  for (Connection* c = head_; c;) {
    Connection* next = c->next;
    auto keep = c->shared_from_this();  // sweep() may close it
    c->sweep(now);
    c = next;
  }
  table_.run_ready();
  graveyard_.clear();
  const bool quiet = closed_since_trim_ == closed_at_last_sweep_;
  if (closed_since_trim_ >= kTrimAfterCloses ||
      (quiet && closed_since_trim_ >= kTrimWhenQuietAfter)) {
    closed_since_trim_ = 0;
    graveyard_.shrink_to_fit();
    if (per_address_.empty()) per_address_.rehash(0);
    ::malloc_trim(0);
  }
  closed_at_last_sweep_ = closed_since_trim_;
}

void ServerCore::stop() {
  if (stopping_) return;
  stopping_ = true;
  boost::system::error_code ignored;
  sweep_timer_.cancel();
  accept_pause_.cancel();
  for (auto& l : listeners_) {
    if (l->tcp) l->tcp->close(ignored);
    if (l->local) l->local->close(ignored);
    if (!l->path.empty()) ::unlink(l->path.c_str());
  }
  while (head_) {
    auto keep = head_->shared_from_this();
    head_->close();
  }
  graveyard_.clear();
  read_later_.clear();
  poll_.close(ignored);
}

std::vector<std::string> ServerCore::addresses() const {
  std::vector<std::string> out;
  for (const auto& l : listeners_) {
    boost::system::error_code ec;
    if (l->tcp) {
      const auto ep = l->tcp->local_endpoint(ec);
      out.push_back(ec ? l->address
                       : util::endpoint_text(reinterpret_cast<const sockaddr*>(ep.data()),
                                             static_cast<socklen_t>(ep.size())));
    } else {
      out.push_back(l->address);
    }
  }
  return out;
}

ServerStats ServerCore::stats() const {
  ServerStats s{
      connections_, table_.keys(), table_.holders(), table_.waiters(), accepted_, refused_, 0};
  for (const Connection* c = head_; c; c = c->next) s.pending_output += c->pending_output();
  return s;
}

void ServerCore::write_status(std::string& out) {
  const Clock::time_point now = Clock::now();
  table_.for_each_key([&](const KeyTable::Key& key) {
    util::JsonWriter w;
    w.begin_object().key("key").value(key.name).key("holders").begin_array();
    for (const Claim* c = key.holders.head; c; c = c->next) {
      const auto* conn = static_cast<const Connection*>(c->owner);
      w.begin_object()
          .key("mode")
          .value(to_string(c->mode))
          .key("token")
          .value(c->token)
          .key("client")
          .value(conn->peer())
          .key("label")
          .value(conn->label())
          .key("held_ms")
          .value(ms_since(c->since, now))
          .end_object();
    }
    w.end_array().key("waiters").begin_array();
    for (const Claim* c = key.waiters.head; c; c = c->next) {
      const auto* conn = static_cast<const Connection*>(c->owner);
      w.begin_object()
          .key("mode")
          .value(to_string(c->mode))
          .key("client")
          .value(conn->peer())
          .key("label")
          .value(conn->label())
          .key("waiting_ms")
          .value(ms_since(c->since, now))
          .end_object();
    }
    w.end_array().end_object();
    out += w.str();
    out += '\n';
  });
  out += "end\n";
}

Server::Server(asio::io_context& io, ServerOptions options)
    : impl_(std::make_shared<ServerCore>(io, std::move(options))) {}

Server::~Server() { impl_->stop(); }

void Server::start() { impl_->start(); }
void Server::stop() { impl_->stop(); }
std::vector<std::string> Server::addresses() const { return impl_->addresses(); }
ServerStats Server::stats() const { return impl_->stats(); }

}  // namespace kagi::lockd
