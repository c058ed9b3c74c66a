// fcgi/listen_socket.hpp — the FastCGI listening socket: created from an address, or taken
// over from the process manager (spawn-fcgi and multiwatch hand it on fd 0, systemd socket
// activation on fd 3).
#pragma once

#include <string>

#include <kagi/util/unique_fd.hpp>

namespace kagi::fcgi {

// Owns one listening socket. Move-only; the destructor closes it and unlinks a unix socket
// path this object created.
class ListenSocket {
 public:
  // `listen`: "" (handed-over socket, see FcgiOptions::listen), "unix:/path" or
  // "host:port" / "[v6addr]:port". A unix socket created here has `mode` from the start
  // (made in a private folder beside the path, then renamed into place). A TCP address must
  // name its host: ":port" is refused (say 127.0.0.1:port, or 0.0.0.0:port on purpose).
  // Throws std::runtime_error saying which address failed, why, and what to do.
  static ListenSocket open(const std::string& listen, unsigned mode, int backlog = 1024);

  ListenSocket() = default;
  ~ListenSocket() { close(); }
  ListenSocket(ListenSocket&& other) noexcept;
  ListenSocket& operator=(ListenSocket&& other) noexcept;
  ListenSocket(const ListenSocket&) = delete;
  ListenSocket& operator=(const ListenSocket&) = delete;

  int fd() const { return fd_.get(); }
  // What it listens on, for messages: "unix:/run/kagi.sock", "fd 0", "127.0.0.1:9000".
  const std::string& description() const { return description_; }
  // Closes the socket (and unlinks a unix socket created here). Idempotent.
  void close();

 private:
  util::UniqueFd fd_;
  std::string description_;
  std::string unlink_path_;  // non-empty: we created this unix socket
};

// Splits "host:port" or "[v6]:port". Returns false when `text` has no valid port.
bool split_host_port(const std::string& text, std::string& host, std::string& port);

}  // namespace kagi::fcgi
