#include <kagi/fcgi/listen_socket.hpp>

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

// Binds `fd` to the unix socket `path` with `mode` from its first instant: nobody may
// connect through a looser mode between bind and chmod. The socket is made in a private
// folder (0700) next to `path`, given its mode there, and renamed into place — which also
// replaces a stale socket file atomically. (A umask around bind would do it too, but the
// umask is per process and other threads may be creating files meanwhile.)
void bind_unix_with_mode(int fd, const std::string& path, unsigned mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "./" : path.substr(0, slash + 1);
  std::string scratch = dir + ".kagi-XXXXXX";
  const std::string scratch_socket_suffix = "/s";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.back() == '/' ||
      scratch.size() + scratch_socket_suffix.size() >= sizeof addr.sun_path) {
    errno = 0;
    fail("FastCGI: bad unix socket path '" + path + "'",
         "give a shorter path: the socket is first made as " + scratch + scratch_socket_suffix +
             ", which must be shorter than " + std::to_string(sizeof addr.sun_path) + " bytes");
  }
  if (::mkdtemp(scratch.data()) == nullptr) {
    fail("FastCGI: cannot create a folder next to " + path,
         "check that " + dir + " exists and is writable by kagi");
  }
  const std::string scratch_path = scratch + scratch_socket_suffix;
  std::memcpy(addr.sun_path, scratch_path.c_str(), scratch_path.size() + 1);
  auto cleanup = [&] {
    const int saved = errno;
    ::unlink(scratch_path.c_str());
    ::rmdir(scratch.c_str());
    errno = saved;
  };
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    cleanup();
    fail("FastCGI: cannot bind " + path);
  }
  if (::chmod(scratch_path.c_str(), mode) != 0) {
    cleanup();
    fail("FastCGI: chmod " + scratch_path);
  }
  if (::rename(scratch_path.c_str(), path.c_str()) != 0) {
    cleanup();
    fail("FastCGI: cannot move the socket into place at " + path);
  }
  ::rmdir(scratch.c_str());
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
    s.fd_.reset(fd);
  } else if (listen.rfind("unix:", 0) == 0) {
    std::string path = listen.substr(5);
    s.description_ = listen;
    // A socket file left by a previous run that died is replaced; anything else is kept.
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      errno = 0;
      fail("FastCGI: " + path + " exists and is not a socket", "remove it or pick another path");
    }
    s.fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.fd_) fail("FastCGI: socket() for " + listen);
    bind_unix_with_mode(s.fd_.get(), path, mode);
    s.unlink_path_ = path;
  } else {
    std::string host, port;
    s.description_ = listen;
    if (!split_host_port(listen, host, port)) {
      errno = 0;
      fail("FastCGI: bad address '" + listen + "'",
           "expected unix:/path, HOST:PORT or [IPv6]:PORT");
    }
    if (host.empty()) {
      // Whoever can connect to the FastCGI socket sets REMOTE_ADDR, HTTPS and every header
      // the app sees: listening on every address must be a choice, not a default.
      errno = 0;
      fail("FastCGI: '" + listen +
               "' names no address, and kagi does not listen on every "
               "address by default",
           "use 127.0.0.1:" + port +
               " (or unix:PATH) for a web server on this host; to "
               "accept FastCGI from other hosts on purpose, say 0.0.0.0:" +
               port + " or [::]:" + port +
               " and let only the web servers reach it (docs/DEPLOY.md)");
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
    s.fd_.reset(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol));
    if (!s.fd_) {
      freeaddrinfo(found);
      fail("FastCGI: socket() for " + listen);
    }
    int one = 1;
    setsockopt(s.fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    rc = ::bind(s.fd_.get(), found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (rc != 0) fail("FastCGI: cannot bind " + listen, "is another process listening there?");
  }
  if (!listen.empty() && ::listen(s.fd_.get(), backlog) != 0) fail("FastCGI: listen on " + listen);
  // Several processes may poll the same socket (spawn-fcgi -F N): a process that loses the
  // race for a connection must get EAGAIN, not block a worker in accept().
  int flags = fcntl(s.fd_.get(), F_GETFL);
  if (flags < 0 || fcntl(s.fd_.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    fail("FastCGI: cannot make " + s.description_ + " non-blocking");
  }
  return s;
}

ListenSocket::ListenSocket(ListenSocket&& other) noexcept
    : fd_(std::move(other.fd_)),
      description_(std::move(other.description_)),
      unlink_path_(std::move(other.unlink_path_)) {}

ListenSocket& ListenSocket::operator=(ListenSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::move(other.fd_);
    description_ = std::move(other.description_);
    unlink_path_ = std::move(other.unlink_path_);
  }
  return *this;
}

void ListenSocket::close() {
  fd_.reset();
  if (!unlink_path_.empty()) ::unlink(unlink_path_.c_str());
  unlink_path_.clear();
}

}  // namespace kagi::fcgi
