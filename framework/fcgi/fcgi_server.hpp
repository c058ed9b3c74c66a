// fcgi/fcgi_server.hpp — the FastCGI front end: serves an App to nginx / Apache over libfcgi.
//
//   kagi::FcgiServer server(app, {.listen = "unix:/run/kagi/kagi.sock", .threads = 4});
//   std::thread stopper([&] { wait_for_sigterm(); server.stop(); });
//   server.run();   // returns after stop() once in-flight requests are done
//
// The listening socket and every idle connection sit in one epoll set, each armed for a
// single event (EPOLLONESHOT). The `threads` workers all wait on that set; the worker that
// gets a connection's event runs libfcgi on it for exactly one request, writes the answer and
// re-arms the still-open connection. So idle connections kept open by the web server (nginx
// `fastcgi_keep_conn on` + upstream `keepalive`, Apache `enablereuse=on`) never pin a worker
// (the classic FCGX_Accept_r loop blocks a thread on its kept connection while new
// connections wait), and a request costs no hand-off between threads: one epoll_wait, the
// reads and the write, and one epoll_ctl to re-arm.
//
// A parked request (Responder::send called later, from another thread) holds its connection
// but no worker; the connection is re-armed once the response is written.
//
// The process ignores SIGPIPE from construction on: libfcgi writes with write(2), and a web
// server that closes the connection mid-response must end that request, not the process.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace kagi {

class App;

struct FcgiOptions {
  // "" = the listening socket handed over by the process manager: fd 3 under systemd socket
  // activation (LISTEN_FDS=1 and LISTEN_PID = this process), else fd 0 (spawn-fcgi,
  // multiwatch). "unix:/path" creates a unix socket (replacing a stale one); "host:port"
  // (or "[v6]:port") listens on TCP.
  std::string listen;
  int threads = 4;              // server.threads: workers serving requests at once
  unsigned socket_mode = 0660;  // server.socket_mode, for unix sockets created here
  std::chrono::milliseconds shutdown_timeout{10000};  // server.shutdown_timeout_ms
};

namespace fcgi {
class Core;
}

class FcgiServer {
 public:
  // Opens (or validates) the listening socket and initialises libfcgi. Throws
  // std::runtime_error naming the address and the reason when the socket cannot be used.
  FcgiServer(App& app, FcgiOptions options);
  // Closes the listening socket (a unix socket created here is unlinked).
  ~FcgiServer();
  FcgiServer(const FcgiServer&) = delete;
  FcgiServer& operator=(const FcgiServer&) = delete;

  // Serves until stop(). Then accepts nothing new, closes idle connections, lets in-flight
  // requests (running and parked) finish for at most shutdown_timeout, and returns. Call
  // once.
  void run();
  // Thread-safe and idempotent; may be called before run() (which then returns at once).
  void stop();

 private:
  std::shared_ptr<fcgi::Core> core_;
};

}  // namespace kagi
