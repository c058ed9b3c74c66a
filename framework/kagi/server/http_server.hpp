// server/http_server.hpp — the embedded HTTP/1.1 front end (Boost.Beast): serves an App
// directly to browsers for development and single-box use; scripts/demo starts it.
//
//   kagi::HttpServer server(app, {.listen = "127.0.0.1:8080"});
//   std::thread stopper([&] { wait_for_sigterm(); server.stop(); });
//   server.run();
//
// The same App and the same responses as the FastCGI front end. Keep-alive; a request
// header block over limits.max_header_bytes gets 431, a body over limits.max_body_bytes
// 413 (answered before the body is read when Content-Length says so), framing that could
// smuggle a request 400 (server/request_reader.hpp); every read buffer is bounded. A client
// that leaves while its request is parked is noticed at once (Responder::client_gone()). `threads`
// threads run one io_context; a handler runs on one of them, so a slow handler occupies a thread
// the way a FastCGI worker does, and a parked request (Responder::send later, from any
// thread) occupies none: its response is posted back to its connection.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace kagi {

class App;

struct HttpOptions {
  std::string listen = "127.0.0.1:8080";  // server.http: "host:port" or "[v6]:port"
  int threads = 4;                        // server.threads
  // server.idle_timeout_ms: a connection with no request in progress for this long is
  // closed; it also bounds the reading of a request's header block and of its body, and the
  // writing of its answer (each phase as a whole, not each read).
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds shutdown_timeout{10000};  // server.shutdown_timeout_ms
  // Connections open at once; one more is answered 503 and closed. When the process runs
  // out of descriptors first, accepting pauses until a connection closes.
  size_t max_connections = 10000;  // server.max_connections
};

namespace server {
class Core;
}

class HttpServer {
 public:
  // Binds and listens. Throws std::runtime_error naming the address and the reason.
  HttpServer(App& app, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves until stop(). Then accepts nothing new, closes idle keep-alive connections,
  // lets in-flight requests (running and parked) finish for at most shutdown_timeout and
  // returns. Call once.
  void run();
  // Thread-safe and idempotent; may be called before run() (which then returns at once).
  void stop();

 private:
  std::shared_ptr<server::Core> core_;
};

}  // namespace kagi
