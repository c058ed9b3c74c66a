// lockd/server.hpp — kagi-lockd's server: the line protocol (lockd/protocol.hpp) over TCP and
// unix sockets, on one Boost.Asio event loop, with the key table (lockd/table.hpp) behind it.
//
//   boost::asio::io_context io(1);
//   lockd::Server server(io, options);       // lockd/options.hpp
//   server.start();                          // binds every address; throws on failure
//   io.run();                                // until stop() is called (e.g. on SIGTERM)
//
// Contract (docs/LOCKD.md has the whole protocol):
//  - One thread runs the io_context; no thread per connection. An idle or waiting connection
//    costs a socket, its reactor record and a small object: tens of thousands fit easily.
//  - A connection's locks are released the moment it ends: a close, a half-close (even one
//    that arrives with the last line), an error, any line other than UNLOCK after a seed-form
//    LOCK, a dead peer found by TCP keepalive or TCP_USER_TIMEOUT, or stop().
//  - A client that does not read its answers has at most 256 KiB of them (plus one answer)
//    kept; its further lines wait unread until it reads. A client that sends without pause is
//    read 256 KiB at a time between the others' turns.
//  - Bad input is answered with "error <reason>" and the connection is closed (releasing
//    everything it held); other connections do not notice.
//  - Every wait has a bound the client chose, or none for the seed's LOCK; an idle
//    connection and a line that does not end are bounded by lockd.idle_timeout_ms and
//    lockd.line_timeout_ms.
//
// Not thread-safe: call everything on the io_context's thread (or before run()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kagi/lockd/options.hpp>

namespace boost::asio {
class io_context;
}

namespace kagi::lockd {

class ServerCore;  // lockd/server.cpp

struct ServerStats {
  size_t connections = 0;
  size_t keys = 0;     // keys held or waited for
  size_t holders = 0;  // grants held
  size_t waiters = 0;  // requests queued
  uint64_t accepted = 0;
  uint64_t refused = 0;  // turned away at accept: not allowed, or over a connection limit
  // Bytes of answers waiting for their clients to read them (each connection's stays below
  // 256 KiB plus one answer: past that its further lines wait unread).
  size_t pending_output = 0;
};

class Server {
 public:
  // Throws std::invalid_argument for a listen address or allow entry that does not parse.
  Server(boost::asio::io_context& io, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Listens on every options.listen address. Throws std::runtime_error naming the address
  // and the reason (in use, permission denied) if one cannot be bound.
  void start();
  // Stops accepting, closes every connection (their locks go with them) and removes the unix
  // sockets it made; run() then returns.
  void stop();

  // The addresses listened on, with the ports the kernel chose for ":0".
  std::vector<std::string> addresses() const;
  ServerStats stats() const;

 private:
  std::shared_ptr<ServerCore> impl_;
};

}  // namespace kagi::lockd
