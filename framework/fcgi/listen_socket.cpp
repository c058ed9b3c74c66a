#include "fcgi/listen_socket.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace kagi::fcgi {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& hint = "") {
  std::string message = what;
  if (errno != 0) message += ": " + std::string(std::strerror(errno));
  if (!hint.empty()) message += " (" + hint + ")";
  throw std::runtime_error(message);
}

bool is_listening_socket(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  int accepting = 0;
  socklen_t len = sizeof accepting;
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting;
}

// systemd passes sockets from fd 3 on, and only to the process named in LISTEN_PID.
int handed_over_fd() {
  const char* fds = std::getenv("LISTEN_FDS");
  const char* pid = std::getenv("LISTEN_PID");
  if (fds && pid && std::atoi(fds) >= 1 && std::atol(pid) == static_cast<long>(getpid())) {
    return 3;
  }
  return 0;
}

}  // namespace

bool split_host_port(const std::string& text, std::string& host, std::string& port) {
  size_t colon;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return false;
    }
    host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos) return false;
    host = text.substr(0, colon);
  }
  port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return std::atoi(port.c_str()) <= 65535;
}

ListenSocket ListenSocket::open(const std::string& listen, unsigned mode, int backlog) {
  ListenSocket s;
  errno = 0;
  if (listen.empty()) {
    int fd = handed_over_fd();
    s.description_ = "fd " + std::to_string(fd);
    if (!is_listening_socket(fd)) {
      errno = 0;
      fail("FastCGI: " + s.description_ + " is not a listening socket",
           "start kagi under spawn-fcgi, multiwatch or a systemd .socket unit, or pass "
           "--fcgi unix:PATH / --fcgi HOST:PORT");
    }
    s.fd_ = fd;
  } else if (listen.rfind("unix:", 0) == 0) {
    std::string path = listen.substr(5);
    s.description_ = listen;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
      fail("FastCGI: bad unix socket path in '" + listen + "'",
           "give an absolute path shorter than 108 bytes");
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    // A socket file left by a previous run that died is replaced; anything else is kept.
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        errno = 0;
        fail("FastCGI: " + path + " exists and is not a socket", "remove it or pick another path");
      }
      ::unlink(path.c_str());
    }
    s.fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s.fd_ < 0) fail("FastCGI: socket() for " + listen);
    if (::bind(s.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      fail("FastCGI: cannot bind " + path, "check that the folder exists and is writable");
    }
    s.unlink_path_ = path;
    if (::chmod(path.c_str(), mode) != 0) fail("FastCGI: chmod " + path);
  } else {
    std::string host, port;
    s.description_ = listen;
    if (!split_host_port(listen, host, port)) {
      errno = 0;
      fail("FastCGI: bad address '" + listen + "'",
           "expected unix:/path, HOST:PORT or [IPv6]:PORT");
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0) {
      errno = 0;
      fail("FastCGI: cannot resolve '" + listen + "': " + gai_strerror(rc));
    }
    s.fd_ = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
    if (s.fd_ < 0) {
      freeaddrinfo(found);
      fail("FastCGI: socket() for " + listen);
    }
    int one = 1;
    setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    rc = ::bind(s.fd_, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0) fail("FastCGI: cannot bind " + listen, "is another process listening there?");
  }
  if (!listen.empty() && ::listen(s.fd_, backlog) != 0) fail("FastCGI: listen on " + listen);
  // Several processes may poll the same socket (spawn-fcgi -F N): a process that loses the
  // race for a connection must get EAGAIN, not block a worker in accept().
  int flags = fcntl(s.fd_, F_GETFL);
  if (flags < 0 || fcntl(s.fd_, F_SETFL, flags | O_NONBLOCK) != 0) {
    fail("FastCGI: cannot make " + s.description_ + " non-blocking");
  }
  return s;
}

ListenSocket::ListenSocket(ListenSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      description_(std::move(other.description_)),
      unlink_path_(std::move(other.unlink_path_)) {}

ListenSocket& ListenSocket::operator=(ListenSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    description_ = std::move(other.description_);
    unlink_path_ = std::move(other.unlink_path_);
  }
  return *this;
}

void ListenSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!unlink_path_.empty()) ::unlink(unlink_path_.c_str());
  unlink_path_.clear();
}

}  // namespace kagi::fcgi
