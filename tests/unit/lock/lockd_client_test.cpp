// lock/detail/lockd_client.hpp: what the connection to kagi-lockd says when it cannot be made,
// and the secrets it refuses at start (those AUTH cannot carry on one line).
#include <kagi/lock/detail/lockd_client.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"

namespace kagi::lock::detail {
namespace {

using namespace std::chrono_literals;

// A unix socket whose server never accepts, with its listen backlog full: a new connect()
// fails with EAGAIN, which is no connection under way. The reason says so, at once.
TEST(LockdClient, AUnixServerWithAFullBacklogIsUnavailableAtOnce) {
  test_support::TempDir dir;
  const std::string path = dir.path() + "/lockd.sock";
  const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  path.copy(a.sun_path, sizeof a.sun_path - 1);
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(server, 0), 0);
  std::vector<int> queued;  // fill the backlog
  for (int i = 0; i < 64; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ASSERT_EQ(errno, EAGAIN);
      ::close(fd);
      break;
    }
    queued.push_back(fd);
  }
  LockdOptions o;
  o.address = "unix:" + path;
  const LockdTarget target = make_lockd_target(o);
  std::error_code ec;
  std::string why;
  const auto began = Clock::now();
  auto conn = LockdConnection::open(target, began + 2s, ec, &why);
  EXPECT_EQ(conn, nullptr) << "a connection that was never made";
  EXPECT_EQ(ec, Errc::kUnavailable);
  EXPECT_NE(why.find("listen backlog is full"), std::string::npos) << why;
  EXPECT_LT(Clock::now() - began, 1s);
  for (int fd : queued) ::close(fd);
  ::close(server);
}

TEST(LockdClient, ASecretThatAuthCannotCarryIsRefusedAtStart) {
  test_support::TempDir dir;
  LockdOptions o;
  o.secret_file = dir.write("good", "s3cret with spaces\n");
  EXPECT_EQ(make_lockd_target(o).secret, "s3cret with spaces");
  for (const std::string& bad :
       {std::string("two\nlines\n"), std::string("tab\there"), std::string(513, 's'),
        std::string("latin1 \xe9"), std::string("\n")}) {
    o.secret_file = dir.write("bad", bad);
    try {
      make_lockd_target(o);
      ADD_FAILURE() << "accepted a secret AUTH cannot send: '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("512 bytes of UTF-8"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kagi::lock::detail
