// server/request_reader.hpp — turns the bytes of one HTTP/1.1 connection into kagi
// requests, one after another, with every buffer bounded. It owns no socket: the HTTP front
// end reads into prepare()/commit(), the unit tests and the fuzzer feed() bytes.
//
//   RequestReader reader({.max_header_bytes = 16384, .max_body_bytes = 1 << 20});
//   reader.feed(bytes);
//   switch (reader.parse()) {
//     case RequestReader::Status::kDone: app.handle(reader.take(), ...); reader.next(); ...
//     case RequestReader::Status::kError: answer reader.error_status(), then close.
//   }
//
// Bounds. The read buffer never holds more than max_header_bytes plus one read: a request
// header block longer than max_header_bytes is 431, a chunk-size line (with its
// extensions) or a trailer that does not fit in the buffer is 400, a body over
// max_body_bytes 413 (from Content-Length before any body byte is read). Boost 1.74's
// parser has no limit of its own on a chunk header or a trailer.
//
// Framing that two parsers could read differently (request smuggling through a proxy) is
// refused with 400: any Transfer-Encoding but a single `chunked`, Transfer-Encoding with
// Content-Length or in an HTTP/1.0 request, obsolete line folding, and an HTTP/1.1 request
// without exactly one Host. After any error the connection must be closed: its remaining
// bytes cannot be trusted to start a request.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/http/request.hpp>

namespace kagi::server {

struct ReaderLimits {
  size_t max_header_bytes = 16384;    // limits.max_header_bytes
  uint64_t max_body_bytes = 1 << 20;  // limits.max_body_bytes
};

class RequestReader {
 public:
  enum class Status {
    kNeedMore,  // read more bytes (prepare/commit or feed), then parse() again
    kHeader,    // the header block is complete and valid; the body is still to come
    kDone,      // a whole request: take() it
    kError,     // answer error_status() with error_message(), then close
  };

  explicit RequestReader(ReaderLimits limits);
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Starts the next request. Bytes already buffered (a pipelined request) are kept.
  void next();

  // Room for the next read: at most `most` bytes, and never beyond the buffer's bound.
  // Empty when the buffer is full (then parse() has reported kError, or a request is done
  // and the client pipelined more than the buffer holds: read again after next()).
  boost::asio::mutable_buffer prepare(size_t most = 16384);
  void commit(size_t n);
  // Copies in as much of `bytes` as fits; returns how many bytes were taken.
  size_t feed(std::string_view bytes);

  // Parses what is buffered. kHeader is returned once per request, and only when its body
  // is not complete yet; after kDone or kError parse() returns the same until next().
  Status parse();

  // After kError: 400, 413 or 431, and a sentence for the client's error page.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // After kHeader or kDone.
  bool head() const;  // a HEAD request
  unsigned version() const;
  bool keep_alive() const;
  bool expects_continue() const;  // Expect: 100-continue
  // After kDone: the request (method, target, headers, body). next() before parse() again.
  http::Request take();

  bool done() const { return status_ == Status::kDone; }
  // While a taken request waits for its answer (a parked long-poll): frees the parser and,
  // when nothing is buffered, the buffer, keeping what the answer needs (head(), version(),
  // keep_alive()). A parked request then costs a few hundred bytes here instead of 16 KiB+.
  // next() starts over as usual.
  void release_parked();
  // Bytes read but not parsed yet (the start of a pipelined request, or a body).
  size_t buffered() const { return buffer_.size(); }
  // The most the buffer ever holds.
  size_t capacity() const { return capacity_; }

 private:
  Status fail(int status, std::string message);
  // The checks Beast does not do, on the raw header block and on the parsed fields.
  bool check_header(std::string_view raw);

  const ReaderLimits limits_;
  const size_t capacity_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  Status status_ = Status::kNeedMore;
  bool header_reported_ = false;
  http::Headers headers_;  // the header block's fields (trailer fields never join them)
  // Set by release_parked(): the parser is gone, these answer for it.
  bool released_ = false;
  bool kept_head_ = false;
  unsigned kept_version_ = 11;
  bool kept_keep_alive_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace kagi::server
