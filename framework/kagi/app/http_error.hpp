// app/http_error.hpp — the app-facing way to end a request with an error page.
//
//   if (!valid) throw kagi::HttpError(400, "the subject is longer than 120 characters");
//
// The pipeline renders templates/errors/<status>.html (or errors/error.html) with the
// message, so handlers never build error pages themselves.
#pragma once

#include <stdexcept>
#include <string>

#include <kagi/http/headers.hpp>

namespace kagi {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

  // Extra headers for the error response, e.g. Retry-After on a 429.
  HttpError& with_header(std::string name, std::string value) {
    headers_.set(std::move(name), std::move(value));
    return *this;
  }
  const http::Headers& headers() const { return headers_; }

 private:
  int status_;
  http::Headers headers_;
};

}  // namespace kagi
