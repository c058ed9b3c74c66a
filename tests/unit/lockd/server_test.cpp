// lockd/server.hpp: the server's connection handling, in process, over real sockets: an end
// of file that comes with the last line, clients that do not read their answers, pipelined
// lines, the seed's release rules, one client's flood against another's latency, and the
// refusals at accept. The server runs on a thread of its own; a test can hold that thread
// (Pause) so that bytes, and a FIN, are all in the socket before the server looks.
#include <kagi/lockd/server.hpp>

#include <arpa/inet.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.hpp"

namespace kagi::lockd {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// A blocking client socket whose reads give up after `timeout`.
class Client {
 public:
  // TCP to 127.0.0.1:`port` (`rcvbuf` > 0: that receive buffer, set before connecting), or
  // the unix socket `path`.
  static Client tcp(int port, int rcvbuf = 0) {
    Client c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (rcvbuf > 0) ::setsockopt(c.fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(c.fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
        << std::strerror(errno);
    const int one = 1;
    ::setsockopt(c.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c;
  }
  static Client unix_socket(const std::string& path) {
    Client c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path.copy(a.sun_path, sizeof a.sun_path - 1);
    EXPECT_EQ(::connect(c.fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
        << std::strerror(errno);
    return c;
  }

  Client(Client&& o) noexcept : fd_(o.fd_), in_(std::move(o.in_)) { o.fd_ = -1; }
  Client& operator=(Client&&) = delete;
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }

  void send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ADD_FAILURE() << "send: " << std::strerror(errno);
        return;
      }
      sent += static_cast<size_t>(n);
    }
  }
  void shut_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }

  // The next line without its '\n'; "<eof>" at an end of file, "<timeout>" if none came
  // within `timeout`, "<error: ...>" on a reset.
  std::string line(std::chrono::milliseconds timeout = 5s) {
    const auto deadline = SteadyClock::now() + timeout;
    for (;;) {
      if (const size_t nl = in_.find('\n'); nl != std::string::npos) {
        std::string l = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        return l;
      }
      const int got = fill(deadline);
      if (got == 0) return "<eof>";
      if (got < 0)
        return errno == EAGAIN ? "<timeout>" : "<error: " + std::string(std::strerror(errno)) + ">";
    }
  }
  std::string call(const std::string& line_text) {
    send(line_text + "\n");
    return line();
  }
  // Reads until the server closes: true if it did within `timeout` (what came meanwhile is
  // counted in lines()).
  bool closed_by_server(std::chrono::milliseconds timeout = 5s) {
    const auto deadline = SteadyClock::now() + timeout;
    for (;;) {
      count_lines();
      const int got = fill(deadline);
      if (got == 0) {
        count_lines();
        return true;
      }
      if (got < 0) return false;
    }
  }
  size_t lines_counted(const std::string& text) const {
    auto it = counted_.find(text);
    return it == counted_.end() ? 0 : it->second;
  }
  int fd() const { return fd_; }

 private:
  explicit Client(int fd) : fd_(fd) {}

  // Reads once: >0 bytes added, 0 at an end of file, -1 (errno EAGAIN at the deadline).
  int fill(SteadyClock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - SteadyClock::now());
    if (left <= 0us) {
      errno = EAGAIN;
      return -1;
    }
    timeval tv{static_cast<time_t>(left.count() / 1000000),
               static_cast<suseconds_t>(left.count() % 1000000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) in_.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno == EWOULDBLOCK) errno = EAGAIN;
    return n > 0 ? 1 : static_cast<int>(n);
  }
  void count_lines() {
    size_t start = 0;
    for (size_t nl; (nl = in_.find('\n', start)) != std::string::npos; start = nl + 1) {
      ++counted_[in_.substr(start, nl - start).substr(0, 3)];
    }
    in_.erase(0, start);
  }

  int fd_;
  std::string in_;
  std::map<std::string, size_t> counted_;  // first three bytes of each line read → how many
};

class ServerTest : public ::testing::Test {
 protected:
  void TearDown() override { stop(); }

  void start(ServerOptions o = {}) {
    unix_path_ = dir_.path() + "/lockd.sock";
    o.listen = {"127.0.0.1:0", "unix:" + unix_path_};
    server_ = std::make_unique<Server>(io_, std::move(o));
    server_->start();
    const std::string tcp = server_->addresses()[0];
    port_ = std::stoi(tcp.substr(tcp.rfind(':') + 1));
    thread_ = std::thread([this] { io_.run(); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    boost::asio::post(io_, [this] { server_->stop(); });
    thread_.join();
  }

  // Runs `f` on the server's thread, returns its result.
  template <typename F>
  auto on_server(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }
  ServerStats stats() {
    return on_server([this] { return server_->stats(); });
  }
  // Whether `done(stats())` comes true within `timeout` (closes reach the server a little
  // after the client's close() returns).
  template <typename Pred>
  bool eventually(Pred done, std::chrono::milliseconds timeout = 2s) {
    const auto deadline = SteadyClock::now() + timeout;
    while (!done(stats())) {
      if (SteadyClock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

  // Holds the server's thread from construction until destruction: whatever clients send
  // meanwhile waits in their sockets (a FIN too), and the server finds it all at once.
  class Pause {
   public:
    explicit Pause(boost::asio::io_context& io) {
      std::promise<void> entered;
      auto in = entered.get_future();
      boost::asio::post(io, [&entered, out = release_.get_future().share()] {
        entered.set_value();
        out.wait();
      });
      in.wait();
    }
    ~Pause() { release_.set_value(); }

   private:
    std::promise<void> release_;
  };
  Pause pause() { return Pause(io_); }

  Client client(int rcvbuf = 0) { return Client::tcp(port_, rcvbuf); }

  // Whether `key` is free right now: another connection takes it without waiting.
  bool is_free(const std::string& key) {
    Client probe = client();
    return probe.call("LOCK " + key + " 0").rfind("ok ", 0) == 0;
  }

  // Connections holding `keys` keys of `key_bytes` bytes in all, so that one STATUS answer is
  // large (about keys × (key_bytes + 150) bytes).
  std::vector<Client> hold_keys(size_t keys, size_t key_bytes) {
    std::vector<Client> holders;
    for (size_t i = 0; i < keys; ++i) {
      if (i % 64 == 0) holders.push_back(client());
      std::string key = "big/" + std::to_string(i) + "/";
      key.resize(key_bytes, 'k');
      EXPECT_EQ(holders.back().call("LOCK " + key + " 0").substr(0, 3), "ok ");
    }
    return holders;
  }

  test_support::TempDir dir_;
  boost::asio::io_context io_{1};
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::string unix_path_;
  int port_ = 0;
};

// The seed's client sends "LOCK k\n" and half-closes (nc -N); a client killed right after its
// line closes. Either way the FIN is in the socket with the line when the server reads it, in
// one readiness event: the lock is granted, then released, and the connection closed.
TEST_F(ServerTest, AnEndOfFileThatComesWithTheLockLineReleasesIt) {
  start();
  constexpr int kClients = 20;
  std::vector<Client> clients;
  {
    Pause p = pause();
    for (int i = 0; i < kClients; ++i) {
      clients.push_back(client());
      clients.back().send("LOCK eof/" + std::to_string(i) + "\n");
      if (i % 2 == 0) {
        clients.back().shut_write();  // the seed's nc -N: reads the answer afterwards
      } else {
        clients.back().close();  // a client killed after its line
      }
    }
  }
  for (int i = 0; i < kClients; i += 2) {
    EXPECT_EQ(clients[i].line(), "ok") << i;
    EXPECT_TRUE(clients[i].closed_by_server(2s)) << "client " << i << ": not closed after its FIN";
  }
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(is_free("eof/" + std::to_string(i))) << "eof/" << i << " is still held";
  }
  EXPECT_TRUE(eventually([](const ServerStats& s) { return s.holders == 0; }));
}

// A client that half-closes while the server holds back its answers (it did not read them),
// then reads them all: its last line is served, and its end of file then ends the connection.
TEST_F(ServerTest, AHalfCloseWhileAnswersPileUpIsSeenOnceTheyAreRead) {
  start();
  auto holders = hold_keys(128, 200);
  Client c = client(4096);
  constexpr int kStatus = 400;  // ~45 KB each: far more than the socket buffers take
  std::string many;
  for (int i = 0; i < kStatus; ++i) many += "STATUS\n";
  c.send(many);
  std::this_thread::sleep_for(200ms);  // the server stops: the client does not read
  c.send("LOCK late/k\n");
  c.shut_write();
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(c.closed_by_server(10s)) << "the half-close was not seen";
  EXPECT_EQ(c.lines_counted("end"), static_cast<size_t>(kStatus));
  EXPECT_EQ(c.lines_counted("ok"), 1u);
  EXPECT_TRUE(is_free("late/k"));
}

// STATUS lines pipelined by a client that never reads: each would append a copy of the table
// to its answers. Past 256 KiB of answers waiting, its further lines wait unread instead; it
// gets every answer once it reads, and other clients are served meanwhile.
TEST_F(ServerTest, AClientThatDoesNotReadCostsBoundedMemory) {
  start();
  auto holders = hold_keys(40, 100);  // one STATUS: about 10 KB
  Client bomb = client(4096);
  constexpr int kStatus = 9000;  // 63 KB of lines, 90 MB of answers
  std::string many;
  for (int i = 0; i < kStatus; ++i) many += "STATUS\n";
  bomb.send(many);
  std::this_thread::sleep_for(300ms);
  const size_t pending = stats().pending_output;
  EXPECT_LT(pending, 512u * 1024) << "answers kept for a client that does not read";
  Client other = client();
  EXPECT_EQ(other.call("PING"), "pong");
  bomb.shut_write();
  EXPECT_TRUE(bomb.closed_by_server(20s));
  EXPECT_EQ(bomb.lines_counted("end"), static_cast<size_t>(kStatus));
}

// Lines sent while a wait is pending are queued (at most lockd.max_queued_lines); the ones
// already served do not count against the next wait.
TEST_F(ServerTest, TheQueuedLineLimitCountsLinesNotYetServed) {
  ServerOptions o;
  o.max_queued_lines = 16;
  start(o);
  Client h = client();
  ASSERT_EQ(h.call("LOCK q/a 0").substr(0, 3), "ok ");
  ASSERT_EQ(h.call("LOCK q/b 0").substr(0, 3), "ok ");
  Client x = client();
  std::string lines = "LOCK q/a 5000\nUNLOCK q/a\nLOCK q/b 5000\n";
  for (int i = 0; i < 8; ++i) lines += "PING\n";
  x.send(lines);  // waits for q/a; ten lines queued behind
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(h.call("UNLOCK q/a"), "ok");
  EXPECT_EQ(x.line().substr(0, 3), "ok ");  // q/a
  EXPECT_EQ(x.line(), "ok");                // UNLOCK q/a; now waiting for q/b, 8 PINGs queued
  std::string more;
  for (int i = 0; i < 7; ++i) more += "PING\n";
  x.send(more);  // 15 queued: within the limit
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(h.call("UNLOCK q/b"), "ok");
  EXPECT_EQ(x.line().substr(0, 3), "ok ");
  for (int i = 0; i < 15; ++i) EXPECT_EQ(x.line(), "pong") << i;
}

// After the seed's bare LOCK, UNLOCK of another key keeps the seed's rules: the next line
// that is not UNLOCK still closes the connection and releases the seed's key.
TEST_F(ServerTest, TheSeedsRulesLastWhileItsKeyIsHeld) {
  start();
  Client c = client();
  ASSERT_EQ(c.call("LOCK s/other 0").substr(0, 3), "ok ");
  ASSERT_EQ(c.call("LOCK s/seed"), "ok");
  EXPECT_EQ(c.call("UNLOCK s/other"), "ok");
  c.send("PING\n");
  EXPECT_TRUE(c.closed_by_server(2s));
  EXPECT_EQ(c.lines_counted("pon"), 0u);
  EXPECT_TRUE(is_free("s/seed"));
  // UNLOCK of the seed's key itself ends its rules: the connection goes on.
  Client d = client();
  ASSERT_EQ(d.call("LOCK s/seed"), "ok");
  EXPECT_EQ(d.call("UNLOCK s/seed"), "ok");
  EXPECT_EQ(d.call("PING"), "pong");
}

// A client that sends as fast as it can (and reads its answers) gets a turn of a few reads,
// then the others get theirs: another client's PING is answered while the flood goes on.
// Without turns the probe is never answered (the flood never drains), so the check is that an
// answer comes at all, with a deadline far beyond a slow (sanitized, loaded) machine's turn.
TEST_F(ServerTest, OneFastClientDoesNotHoldTheLoop) {
  start();
  Client flood = client();
  std::atomic<bool> stop{false};
  std::atomic<size_t> flood_answers{0};
  std::string chunk;
  while (chunk.size() < 64 * 1024) chunk += "PING\n";
  std::thread writer([&] {
    while (!stop.load()) {
      if (::send(flood.fd(), chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) return;
    }
  });
  std::thread reader([&] {
    char buf[65536];
    for (ssize_t n; (n = ::recv(flood.fd(), buf, sizeof buf, 0)) > 0;) flood_answers += n;
  });
  while (flood_answers.load() < chunk.size()) std::this_thread::sleep_for(10ms);  // flood is on
  Client probe = client();
  probe.send("PING\n");
  const std::string answer = probe.line(20s);
  const size_t answered_at = flood_answers.load();
  std::this_thread::sleep_for(100ms);
  const size_t after = flood_answers.load();
  stop = true;
  writer.join();
  ::shutdown(flood.fd(), SHUT_RDWR);
  reader.join();
  EXPECT_EQ(answer, "pong") << "the probe waited for the flood";
  EXPECT_GT(after, answered_at) << "the flood was still being served when the probe's turn came";
}

// Refused at accept: the error line reaches a client whose command was already sent.
TEST_F(ServerTest, ARefusedClientReadsWhyEvenIfItSentFirst) {
  ServerOptions o;
  o.max_connections = 1;
  start(o);
  Client first = client();
  ASSERT_EQ(first.call("PING"), "pong");
  std::vector<Client> late;
  {
    Pause p = pause();
    for (int i = 0; i < 5; ++i) {
      late.push_back(client());
      late.back().send("LOCK r/k 1000\n");
    }
  }
  for (Client& c : late) {
    EXPECT_EQ(c.line(), "error too many connections (lockd.max_connections = 1)");
  }
}

// This host's clients (loopback, unix sockets) share one address: the per-address cap does
// not apply to them; lockd.max_local_connections may bound them instead.
TEST_F(ServerTest, LocalClientsHaveTheirOwnCap) {
  ServerOptions o;
  o.max_connections_per_address = 2;
  start(o);
  std::vector<Client> many;
  for (int i = 0; i < 6; ++i) many.push_back(client());
  for (int i = 0; i < 3; ++i) many.push_back(Client::unix_socket(unix_path_));
  for (Client& c : many) EXPECT_EQ(c.call("PING"), "pong");
  stop();
  server_.reset();
  io_.restart();
  ServerOptions capped;
  capped.max_local_connections = 3;
  start(capped);
  std::vector<Client> three;
  for (int i = 0; i < 2; ++i) three.push_back(client());
  three.push_back(Client::unix_socket(unix_path_));
  for (Client& c : three) EXPECT_EQ(c.call("PING"), "pong");
  Client fourth = Client::unix_socket(unix_path_);
  EXPECT_EQ(fourth.line(),
            "error too many connections from this host (lockd.max_local_connections = 3)");
}

// lockd.socket_group: the unix socket has that group from before it listens; a group that
// does not exist stops the start.
TEST_F(ServerTest, TheUnixSocketGetsItsGroup) {
  ServerOptions o;
  std::vector<char> buf(16384);
  group g{};
  group* mine = nullptr;
  ASSERT_EQ(::getgrgid_r(::getegid(), &g, buf.data(), buf.size(), &mine), 0);
  ASSERT_NE(mine, nullptr);
  o.socket_group = mine->gr_name;
  start(o);
  struct stat st {};
  ASSERT_EQ(::stat(unix_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, ::getegid());
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  stop();

  boost::asio::io_context io(1);
  ServerOptions bad;
  bad.listen = {"unix:" + dir_.path() + "/bad.sock"};
  bad.socket_group = "kagi-no-such-group";
  Server server(io, bad);
  try {
    server.start();
    FAIL() << "started with a group that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lockd.socket_group 'kagi-no-such-group'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(::access((dir_.path() + "/bad.sock").c_str(), F_OK), 0) << "the socket was left";
}

}  // namespace
}  // namespace kagi::lockd
