// app/responder.hpp — a front end's handle on one request/response exchange.
//
// The application calls send() exactly once per request: before App::handle() returns for an
// ordinary request, or later, from any thread, for a parked one (chat long-poll). A front end
// must therefore not assume the response is ready when handle() returns.
#pragma once

#include <kagi/http/response.hpp>

namespace kagi {

class Responder {
 public:
  virtual ~Responder() = default;
  // Writes the response to the client. Called once; a client that went away is not an
  // error (the write is dropped and the connection closed).
  virtual void send(http::Response response) = 0;
  // Best effort: true once the front end knows the client disconnected.
  virtual bool client_gone() const { return false; }
};

}  // namespace kagi
