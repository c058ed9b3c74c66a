#include <kagi/fcgi/listen_socket.hpp>

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kagi::fcgi {
namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/kagi-listen-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  return dir;
}

TEST(SplitHostPort, Forms) {
  std::string host, port;
  ASSERT_TRUE(split_host_port("127.0.0.1:9000", host, port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, "9000");
  ASSERT_TRUE(split_host_port("[::1]:9000", host, port));
  EXPECT_EQ(host, "::1");
  ASSERT_TRUE(split_host_port(":9000", host, port));
  EXPECT_EQ(host, "");
  EXPECT_FALSE(split_host_port("localhost", host, port));
  EXPECT_FALSE(split_host_port("localhost:", host, port));
  EXPECT_FALSE(split_host_port("localhost:99999", host, port));
  EXPECT_FALSE(split_host_port("localhost:9x", host, port));
  EXPECT_FALSE(split_host_port("[::1]9000", host, port));
}

TEST(ListenSocket, UnixSocketWithModeReplacesStaleAndUnlinks) {
  std::string dir = temp_dir();
  std::string path = dir + "/k.sock";
  {
    // A stale socket file from a crashed run.
    int stale = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    ASSERT_EQ(::bind(stale, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(stale);
  }
  {
    ListenSocket s = ListenSocket::open("unix:" + path, 0640);
    ASSERT_GE(s.fd(), 0);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    int c = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    EXPECT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(c);
  }
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0) << "socket file left behind";
  ::rmdir(dir.c_str());
}

// The socket must never exist at its path with a looser mode than asked: no bind-then-chmod
// window in which anyone could connect. inotify reports, in order, what happened to names in
// the folder: the path must appear by a rename (IN_MOVED_TO) of a socket that already has its
// mode, never be created there (IN_CREATE) or have its mode changed there (IN_ATTRIB).
TEST(ListenSocket, UnixSocketAppearsWithItsFinalMode) {
  std::string dir = temp_dir();
  std::string path = dir + "/k.sock";
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(in, 0);
  ASSERT_GE(inotify_add_watch(in, dir.c_str(), IN_CREATE | IN_ATTRIB | IN_MOVED_TO), 0);
  {
    ListenSocket s = ListenSocket::open("unix:" + path, 0600);
    std::vector<std::string> events;
    alignas(inotify_event) char buf[8192];
    for (ssize_t n; (n = ::read(in, buf, sizeof buf)) > 0;) {
      for (char* p = buf; p < buf + n;) {
        auto* e = reinterpret_cast<inotify_event*>(p);
        if (e->len > 0 && std::string(e->name) == "k.sock") {
          events.push_back((e->mask & IN_CREATE)   ? "create"
                           : (e->mask & IN_ATTRIB) ? "attrib"
                                                   : "moved_to");
        }
        p += sizeof(inotify_event) + e->len;
      }
    }
    EXPECT_EQ(events, std::vector<std::string>{"moved_to"})
        << "the socket was created or chmod-ed at its final path";
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  ::close(in);
  // Nothing left beside it: the private folder it was made in is gone.
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> left;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") left.push_back(e->d_name);
  }
  closedir(d);
  EXPECT_TRUE(left.empty()) << left.front();
  ::rmdir(dir.c_str());
}

TEST(ListenSocket, RefusesToReplaceARegularFile) {
  std::string dir = temp_dir();
  std::string path = dir + "/data.txt";
  std::ofstream(path) << "keep me";
  try {
    ListenSocket::open("unix:" + path, 0660);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a socket"), std::string::npos) << e.what();
  }
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(ListenSocket, TcpOnAnEphemeralPort) {
  ListenSocket s = ListenSocket::open("127.0.0.1:0", 0660);
  EXPECT_GE(s.fd(), 0);
  EXPECT_EQ(s.description(), "127.0.0.1:0");
}

// ":9000" used to listen on every address: whoever reaches the port sets REMOTE_ADDR and
// HTTPS. Every address must be asked for by name.
TEST(ListenSocket, AnAddressWithoutHostIsRefusedWithTheWayToListenEverywhere) {
  try {
    ListenSocket::open(":0", 0660);
    FAIL() << "':0' accepted";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("127.0.0.1:0"), std::string::npos) << m;
    EXPECT_NE(m.find("0.0.0.0:0"), std::string::npos) << m;
  }
  ListenSocket everywhere = ListenSocket::open("0.0.0.0:0", 0660);
  EXPECT_GE(everywhere.fd(), 0);
}

TEST(ListenSocket, BadAddressesSayWhatIsExpected) {
  for (const char* bad : {"nonsense", "unix:", "1.2.3.4:http"}) {
    try {
      ListenSocket::open(bad, 0660);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("FastCGI"), std::string::npos) << e.what();
    }
  }
}

TEST(ListenSocket, HandedOverFdMustBeAListeningSocket) {
  // fd 0 of a test run is a terminal, a pipe or /dev/null — never a listening socket.
  unsetenv("LISTEN_FDS");
  try {
    ListenSocket::open("", 0660);
    FAIL() << "fd 0 accepted as a listening socket";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("spawn-fcgi"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kagi::fcgi
