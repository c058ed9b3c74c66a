// fcgi/fcgi_server.hpp — the FastCGI front end: serves an App to nginx / Apache.
//
//   kagi::FcgiServer server(app, {.listen = "unix:/run/kagi/kagi.sock", .threads = 4});
//   std::thread stopper([&] { wait_for_sigterm(); server.stop(); });
//   server.run();   // returns after stop() once in-flight requests are done
//
// The listening socket and every connection sit in one epoll set: the listening socket armed
// for a single event (EPOLLONESHOT), each connection edge-triggered from its accept to its
// close. The `threads` workers all wait on that set; the worker that gets a connection's event
// takes it (no other worker can meanwhile: an event for a connection in hand only marks it),
// reads what arrived without blocking (fcgi/protocol.hpp assembles the records) and either
// puts the connection back to wait for more or, once the request is complete, serves it and
// writes the answer. Putting it back costs no system call unless something arrived while it
// was held (then one epoll_ctl makes the kernel look again). So neither an idle connection kept
// open by the web server (nginx `fastcgi_keep_conn on`, Apache `enablereuse=on`) nor a slow
// one — half a record header, a body streamed at a few bytes a second (Apache's
// mod_proxy_fcgi streams bodies as they come) — ever holds a worker thread.
//
// Responses go the same way: what the web server does not take at once (a client that
// stopped reading behind `fastcgi_buffering off`) is written from the epoll set as it takes
// it; no thread waits for it.
//
// Deadlines, checked every 200 ms: a request's params must arrive within read_timeout of its
// first byte (else the connection is dropped: the peer stalled mid-protocol), and its body
// within body_timeout of the end of the params (else 408; the rest of that body is skipped
// and the connection carries the next request). A response the web server takes nothing of
// for read_timeout is given up on (the connection closed). Idle connections between
// requests have no deadline: the web server owns their lifetime.
//
// A parked request (Responder::send called later, from another thread) holds its connection
// but no worker; its client_gone() turns true when the web server closes the connection or
// sends FCGI_ABORT_REQUEST. The connection is re-armed once the response is written.
//
// The process ignores SIGPIPE from construction on: a web server that closes the connection
// mid-response must end that request, not the process.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace kagi {

class App;

struct FcgiOptions {
  // "" = the listening socket handed over by the process manager: fd 3 under systemd socket
  // activation (LISTEN_FDS=1 and LISTEN_PID = this process), else fd 0 (spawn-fcgi,
  // multiwatch). "unix:/path" creates a unix socket with socket_mode from the start
  // (replacing a stale one); "host:port" (or "[v6]:port") listens on TCP — a host is
  // required, ":port" is refused (listening on every address must be said: 0.0.0.0:port).
  std::string listen;
  int threads = 4;              // server.threads: workers serving requests at once
  unsigned socket_mode = 0660;  // server.socket_mode, for unix sockets created here
  std::chrono::milliseconds shutdown_timeout{10000};  // server.shutdown_timeout_ms
  std::chrono::milliseconds read_timeout{10000};      // limits.fcgi_read_timeout_ms
  std::chrono::milliseconds body_timeout{30000};      // limits.body_timeout_ms
};

namespace fcgi {
class Core;
}

class FcgiServer {
 public:
  // Opens (or validates) the listening socket. Throws
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
