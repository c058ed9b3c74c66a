// The lockd backend beyond the conformance suite: what only a kagi-lockd server shows (each
// holder's label and address), what a server that is not there or goes away does to a request
// (LockUnavailable within the deadline; guards fenced), fencing tokens, and sharing the server
// with a client that speaks the seed's bytes. Every test runs a real kagi-lockd process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/cluster_status.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/util/process.hpp>
#include "../../support/lockd_server.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;

// A connected TCP socket to "127.0.0.1:PORT", or -1.
int connect_to(const std::string& address) {
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

class LockdBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(KAGI_LOCKD_BIN).empty())
      GTEST_SKIP() << "built without kagi-lockd (KAGI_APPS=OFF)";
    std::string why;
    server_ = test_support::LockdServer::start({}, &why);
    ASSERT_NE(server_, nullptr) << why;
  }
  LockOptions options(const std::string& address) const {
    LockOptions o;
    o.backend = "lockd";
    o.dir = dir_.path() + "/locks";
    o.timeout = 2s;
    o.lockd.address = address;
    return o;
  }

  test_support::TempDir dir_;
  std::unique_ptr<test_support::LockdServer> server_;
};

TEST_F(LockdBackendTest, StatusShowsEachHolderWithItsRequestAndAddress) {
  auto service = LockService::create(options(server_->address()));
  auto ctx = service->context({"req-7", "POST", "/bbs/3 post?x=<y>", "192.0.2.9"});
  auto guard = ctx->exclusive("bbs/board/3");
  const ClusterStatus status = read_cluster_status(options(server_->address()), 2s);
  ASSERT_EQ(status.error, "");
  EXPECT_TRUE(status.spans_hosts);
  EXPECT_EQ(status.backend, "lockd");
  ASSERT_EQ(status.entries.size(), 1u);
  const RegistryEntry& e = status.entries[0];
  EXPECT_EQ(e.name, "bbs/board/3");
  EXPECT_FALSE(e.waiting);
  EXPECT_EQ(e.mode, Mode::kExclusive);
  EXPECT_EQ(e.request_id, "req-7");
  EXPECT_EQ(e.method, "POST");
  EXPECT_EQ(e.path, "/bbs/3 post?x=<y>");  // encoded on the wire, decoded here
  EXPECT_EQ(e.host, util::host_name());
  EXPECT_EQ(e.pid, ::getpid());
  EXPECT_EQ(e.client_address.rfind("127.0.0.1:", 0), 0u) << e.client_address;
  EXPECT_EQ(status.hosts, 1u);
}

// A label is at most 512 bytes on the wire: a request with a long, odd path still locks.
TEST_F(LockdBackendTest, ALongPathIsCutFromTheLabelNotFromTheLock) {
  auto service = LockService::create(options(server_->address()));
  auto ctx = service->context({"req-long", "GET", "/" + std::string(400, ' ') + "\xe9", ""});
  auto guard = ctx->exclusive("long/path");
  EXPECT_TRUE(guard.verify() == std::error_code());
  const ClusterStatus status = read_cluster_status(options(server_->address()), 2s);
  ASSERT_EQ(status.entries.size(), 1u);
  EXPECT_EQ(status.entries[0].request_id, "req-long");
  EXPECT_EQ(status.entries[0].path.rfind("/   ", 0), 0u);
}

TEST_F(LockdBackendTest, TokensAreOrderedEpochsThatIncreasePerName) {
  auto service = LockService::create(options(server_->address()));
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto ctx = service->context({"r", "GET", "/", ""});
    auto guard = ctx->exclusive("fence/x");
    EXPECT_TRUE(epoch_is_ordered(guard.epoch())) << guard.epoch();
    EXPECT_GT(guard.epoch(), last);
    last = guard.epoch();
    EXPECT_FALSE(guard.verify());
  }
}

// A PHP page speaking the seed's bytes and a kagi request exclude each other on one server.
TEST_F(LockdBackendTest, ASeedClientAndKagiShareOneServer) {
  const int seed = connect_to(server_->address());
  ASSERT_GE(seed, 0);
  ASSERT_EQ(::write(seed, "LOCK bbs/board/9\n", 17), 17);
  ASSERT_EQ(read_line(seed), "ok");
  auto service = LockService::create(options(server_->address()));
  auto ctx = service->context({"r", "POST", "/", ""});
  EXPECT_FALSE(ctx->try_exclusive("bbs/board/9"));
  EXPECT_THROW(ctx->shared("bbs/board/9", 100ms), LockBusy);
  ::close(seed);  // the seed's unlock
  EXPECT_TRUE(ctx->exclusive("bbs/board/9", 2s).held());
}

TEST_F(LockdBackendTest, NoServerIsUnavailableWithinTheDeadline) {
  // A port nobody listens on: bound, then closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  auto service = LockService::create(options("127.0.0.1:" + std::to_string(ntohs(a.sin_port))));
  auto ctx = service->context({"r", "POST", "/", ""});
  const auto started = Clock::now();
  try {
    ctx->exclusive("x/y", 300ms);
    FAIL() << "locked without a server";
  } catch (const LockUnavailable& e) {
    EXPECT_NE(e.reason().find("connect"), std::string::npos) << e.reason();
  }
  EXPECT_LT(Clock::now() - started, 1s);
  const ClusterStatus status =
      read_cluster_status(options("127.0.0.1:" + std::to_string(ntohs(a.sin_port))), 1s);
  EXPECT_NE(status.error, "");
}

TEST_F(LockdBackendTest, AServerThatGoesAwayFencesItsGuards) {
  auto service = LockService::create(options(server_->address()));
  auto ctx = service->context({"r", "POST", "/", ""});
  auto guard = ctx->exclusive("gone/x");
  EXPECT_FALSE(guard.verify());
  EXPECT_EQ(server_->stop(), 0);  // SIGTERM: a clean stop, every connection closed
  EXPECT_EQ(guard.verify(), Errc::kFenceLost);
  auto next = service->context({"r2", "POST", "/", ""});
  EXPECT_THROW(next->exclusive("gone/y", 200ms), LockUnavailable);
}

// With lockd.secret_file the server wants AUTH from peers off loopback; kagi sends it on every
// new connection when locks.lockd.secret_file is set, and a wrong one is refused (a peer on
// loopback may skip AUTH, but a wrong secret is an error wherever it comes from).
TEST_F(LockdBackendTest, TheSecretIsSentAndAWrongOneRefused) {
  const std::string right = dir_.path() + "/secret", wrong = dir_.path() + "/wrong";
  std::ofstream(right) << "s3cret\n";
  std::ofstream(wrong) << "guess\n";
  std::string why;
  auto server = test_support::LockdServer::start({"--set", "lockd.secret_file=" + right}, &why);
  ASSERT_NE(server, nullptr) << why;
  LockOptions o = options(server->address());
  o.lockd.secret_file = right;
  auto good = LockService::create(o);
  EXPECT_TRUE(good->context({"r", "GET", "/", ""})->exclusive("auth/x", 1s).held());
  o.lockd.secret_file = wrong;
  auto bad = LockService::create(o);
  try {
    bad->context({"r", "GET", "/", ""})->exclusive("auth/y", 500ms);
    FAIL() << "locked with a wrong secret";
  } catch (const LockUnavailable& e) {
    EXPECT_NE(e.reason().find("AUTH refused: error bad secret"), std::string::npos) << e.reason();
  }
}

TEST_F(LockdBackendTest, ABadAddressOrSecretFileRefusesToStart) {
  EXPECT_THROW(LockService::create(options("lockd.example:1006")), std::invalid_argument);
  LockOptions o = options(server_->address());
  o.lockd.secret_file = dir_.path() + "/missing";
  EXPECT_THROW(LockService::create(o), std::invalid_argument);
}

// The server restarts under a request that holds a lock; another request takes the lock on
// the new server. The first request's next lock finds its connection dead: it must not be
// retried on a fresh connection as if nothing were held. Every guard of the request is fenced
// and it takes no more locks until it ends.
TEST_F(LockdBackendTest, ALostConnectionFencesTheRequestInsteadOfRetrying) {
  auto service = LockService::create(options(server_->address()));
  auto first = service->context({"first", "POST", "/", ""});
  auto a = first->exclusive("lost/a");
  const std::string address = server_->address();
  EXPECT_EQ(server_->stop(), 0);
  std::string why;
  server_ = test_support::LockdServer::start({}, &why, address);
  ASSERT_NE(server_, nullptr) << why;
  auto second = service->context({"second", "POST", "/", ""});
  auto theirs = second->exclusive("lost/a", 1s);  // the old server's locks are gone
  ASSERT_TRUE(theirs.held());

  EXPECT_THROW(first->exclusive("lost/b", 500ms), LockUnavailable);
  EXPECT_FALSE(a.held()) << "two requests hold lost/a";
  EXPECT_EQ(a.verify(), Errc::kFenceLost);
  try {
    first->exclusive("lost/c", 200ms);
    FAIL() << "a request that lost its locks took another";
  } catch (const LockUnavailable& e) {
    EXPECT_NE(e.reason().find("ended while it held locks"), std::string::npos) << e.reason();
  }
  EXPECT_TRUE(theirs.held());
  EXPECT_FALSE(theirs.verify());
  first->end_request();  // a's release is a no-op: the lock is the second request's now
  EXPECT_FALSE(theirs.verify());
  EXPECT_TRUE(first->exclusive("lost/c", 1s).held());  // the context serves its next request
}

// kagi-lockd closes a connection that asks for more keys than it allows, and every lock on it
// goes: kagi refuses the 65th lock of a request itself, and the 64 stay held.
TEST_F(LockdBackendTest, TheSixtyFifthLockIsRefusedAndTheOthersStayHeld) {
  auto service = LockService::create(options(server_->address()));
  auto ctx = service->context({"many", "POST", "/", ""});
  std::vector<ExclusiveGuard> held;
  for (int i = 0; i < 64; ++i) held.push_back(ctx->exclusive("many/" + std::to_string(i)));
  try {
    ctx->exclusive("many/64");
    FAIL() << "a 65th lock on one connection";
  } catch (const LockError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 64 locks"), std::string::npos) << e.what();
  }
  const std::string two[] = {"many/x", "many/y"};
  EXPECT_THROW(ctx->exclusive_set(two), LockError);
  auto other = service->context({"other", "POST", "/", ""});
  for (int i = 0; i < 64; ++i) {
    EXPECT_TRUE(held[i].held()) << i;
    EXPECT_FALSE(other->try_exclusive("many/" + std::to_string(i)).has_value()) << i;
  }
  EXPECT_FALSE(held[0].verify());
}

// A server configured below kagi's limit refuses the command and closes: the request's locks
// are gone with the connection, and its guards say so.
TEST_F(LockdBackendTest, AServerLimitThatClosesTheConnectionFencesEveryGuard) {
  std::string why;
  auto server =
      test_support::LockdServer::start({"--set", "lockd.max_keys_per_connection=4"}, &why);
  ASSERT_NE(server, nullptr) << why;
  auto service = LockService::create(options(server->address()));
  auto ctx = service->context({"few", "POST", "/", ""});
  std::vector<ExclusiveGuard> held;
  for (int i = 0; i < 4; ++i) held.push_back(ctx->exclusive("few/" + std::to_string(i)));
  EXPECT_THROW(ctx->exclusive("few/4"), LockError);  // "error too many keys", then closed
  auto other = service->context({"other", "POST", "/", ""});
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(held[i].held()) << i;
    EXPECT_EQ(held[i].verify(), Errc::kFenceLost) << i;
    EXPECT_TRUE(other->try_exclusive("few/" + std::to_string(i)).has_value()) << i;
  }
  EXPECT_THROW(ctx->exclusive("few/5", 200ms), LockUnavailable);
}

// A set of long names does not fit in one LOCKSET line (lockd.max_line_bytes, 8192): it is
// taken one by one instead of being refused.
TEST_F(LockdBackendTest, ASetTooLongForOneLineIsTakenNameByName) {
  auto service = LockService::create(options(server_->address()));
  auto ctx = service->context({"long", "POST", "/", ""});
  std::vector<std::string> names;
  for (int i = 0; i < 60; ++i) {
    std::string name = "long/" + std::to_string(100 + i) + "/";
    name.resize(190, 'n');
    names.push_back(name);
  }
  auto guards = ctx->exclusive_set(names);
  ASSERT_EQ(guards.size(), names.size());
  auto other = service->context({"other", "POST", "/", ""});
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(guards[i].held());
    EXPECT_FALSE(guards[i].verify());
    EXPECT_FALSE(other->try_exclusive(names[i]).has_value());
  }
}

// The watchdog revokes a lock while the request's thread waits for another one on the same
// connection: the UNLOCK cannot overtake the wait (the server queues it behind), but it goes
// as soon as the wait's answer is in, not at the request's next lock call.
TEST_F(LockdBackendTest, ARevocationDuringAWaitIsSentWhenTheWaitEnds) {
  LockOptions o = options(server_->address());
  o.max_hold = 300ms;
  o.watchdog_interval = 10ms;
  auto service = LockService::create(o);
  const int seed = connect_to(server_->address());  // holds rv/busy, unseen by the watchdog
  ASSERT_GE(seed, 0);
  ASSERT_EQ(::write(seed, "LOCK rv/busy\n", 13), 13);
  ASSERT_EQ(read_line(seed), "ok");
  auto hung = service->context({"hung", "POST", "/", ""});
  auto stale = hung->exclusive("rv/held");
  const auto began = Clock::now();
  std::thread waiting([&] {
    Guard never;
    EXPECT_EQ(hung->try_acquire_for("rv/busy", Mode::kExclusive, 800ms, never), Errc::kTimeout);
    // ...and then the request does something else for a long while: no more lock calls.
  });
  auto next = service->context({"next", "POST", "/", ""});
  Guard got;
  const std::error_code ec = next->try_acquire_for("rv/held", Mode::kExclusive, 3s, got);
  const auto took = Clock::now() - began;
  waiting.join();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_LT(took, 1500ms) << "granted "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                          << " ms after the hold began";
  EXPECT_FALSE(stale.held());
  ::close(seed);
}

}  // namespace
}  // namespace kagi::lock
