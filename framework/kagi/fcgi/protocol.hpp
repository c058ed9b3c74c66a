// fcgi/protocol.hpp — the FastCGI wire format (the responder role), as kagi speaks it: an
// incremental reader of the web server's records and the encoders of kagi's answers.
//
// Why kagi reads the records itself instead of through libfcgi: libfcgi reads a request with
// blocking reads and no deadline, so a peer that sends half a record header, or a body at
// 600 bytes a second (Apache's mod_proxy_fcgi streams bodies as they come), holds a worker
// thread for as long as it likes. RequestReader is fed whatever bytes have arrived and says
// whether the request is complete; the server reads a connection only when epoll says it is
// readable, so a slow peer costs a buffer and a deadline, never a thread.
//
// Pure: no I/O, no clock. The unit tests feed it byte strings cut at every position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::fcgi {

// Record types and values of the FastCGI 1.0 specification.
enum class RecordType : uint8_t {
  kBeginRequest = 1,
  kAbortRequest = 2,
  kEndRequest = 3,
  kParams = 4,
  kStdin = 5,
  kStdout = 6,
  kStderr = 7,
  kData = 8,
  kGetValues = 9,
  kGetValuesResult = 10,
  kUnknownType = 11,
};
constexpr uint8_t kVersion = 1;
constexpr uint16_t kRoleResponder = 1;
constexpr uint8_t kFlagKeepConn = 1;
enum class ProtocolStatus : uint8_t {
  kRequestComplete = 0,
  kCantMpxConn = 1,
  kOverloaded = 2,
  kUnknownRole = 3,
};

// What RequestReader keeps of one request.
struct ReaderLimits {
  size_t max_params_bytes = 64 * 1024;  // the encoded FCGI_PARAMS stream; more → params_too_large
  size_t max_body_bytes = 1024 * 1024;  // FCGI_STDIN; more → body_too_large (the rest dropped)
};

// Reads one request at a time from the bytes of one connection. Bytes that arrive after a
// complete request (the next request, an FCGI_ABORT_REQUEST) stay buffered for later.
class RequestReader {
 public:
  enum class Status {
    kNeedMore,  // no complete request yet: read more bytes
    kComplete,  // params and the whole body are here (see the accessors)
    kError,     // protocol garbage: close the connection (error() says what)
  };

  explicit RequestReader(ReaderLimits limits = {}) : limits_(limits) {}

  // Appends bytes read from the connection.
  void append(const char* data, size_t size) { in_.append(data, size); }
  // Processes the buffered records. Stops at the end of a request (kComplete, until next()),
  // at an incomplete record (kNeedMore) or at garbage (kError, for good).
  Status advance();
  // Done with the current request: start on the next one with whatever is buffered. Called
  // before the whole body arrived (a 408), what still comes of it is skipped: records of a
  // request that is not open are ignored.
  void next();

  // Answers to records that need one (FCGI_GET_VALUES, an unknown type, a second request
  // on the connection, an abort of a request still being read). The caller writes them to
  // the connection and clears the string.
  std::string& replies() { return replies_; }

  // A request has begun: at least one byte of its first record arrived.
  bool started() const { return phase_ != Phase::kIdle || !unparsed().empty(); }
  // Its params are complete (what remains is the body).
  bool params_done() const { return phase_ == Phase::kBody || phase_ == Phase::kDone; }
  // The web server sent FCGI_ABORT_REQUEST for the request in hand (complete or not).
  bool aborted() const { return aborted_; }
  // The web server asked to keep the connection open after the response (FCGI_KEEP_CONN).
  bool keep_conn() const { return keep_conn_; }
  uint16_t request_id() const { return request_id_; }
  bool params_too_large() const { return params_too_large_; }
  bool body_too_large() const { return body_too_large_; }
  // "NAME=value" strings, in the order received (valid once params_done(), until next()).
  const std::vector<std::string_view>& params() const { return params_; }
  // The same strings as a CGI environment: null-terminated, then a null pointer.
  char* const* envp() const { return envp_.data(); }
  // The body so far (empty when body_too_large()).
  const std::string& body() const { return body_; }
  std::string take_body() { return std::move(body_); }
  const std::string& error() const { return error_; }
  // Bytes received and not yet consumed as whole records.
  size_t buffered() const { return in_.size() - pos_; }
  // A whole record is buffered and not yet processed: advance() has work without another
  // byte from the peer (after next(), when the next request came along with this one).
  bool record_ready() const;

  // While a complete request waits for its answer (a parked long-poll): frees its params and
  // body (the request was built from them) and the input already consumed, keeping what the
  // answer needs (request id, keep-conn, abort). next() starts over as usual.
  void release_parked();

 private:
  enum class Phase { kIdle, kParams, kBody, kDone };
  std::string_view unparsed() const { return std::string_view(in_).substr(pos_); }
  Status fail(std::string message);
  // Handles one whole record; false on garbage (error_ set).
  bool on_record(RecordType type, uint16_t id, std::string_view content);
  bool decode_params();
  void reset_request();

  ReaderLimits limits_;
  std::string in_;
  size_t pos_ = 0;  // in_[0, pos_) is consumed
  std::string replies_;
  Phase phase_ = Phase::kIdle;
  uint16_t request_id_ = 0;
  bool keep_conn_ = false;
  bool aborted_ = false;
  bool params_too_large_ = false;
  bool body_too_large_ = false;
  // The params of a request are decoded into one buffer of "NAME=value\0" strings that
  // params_ and envp_ point into: a kept connection reuses all three, so reading a request's
  // params allocates nothing once the connection has read one as big.
  std::string params_raw_;
  std::string params_text_;
  std::vector<std::string_view> params_;
  std::vector<char*> envp_{nullptr};
  std::string body_;
  std::string error_;
};

// One name-value pair as FCGI_PARAMS and FCGI_GET_VALUES_RESULT carry it: each length in 1
// byte (< 128) or 4 (top bit set), then the name, then the value.
void append_name_value(std::string& out, std::string_view name, std::string_view value);
// One record: header, content, padding to a multiple of 8. `content` ≤ 65535 bytes.
void append_record(std::string& out, RecordType type, uint16_t request_id,
                   std::string_view content);
// FCGI_END_REQUEST with application status 0.
void append_end_request(std::string& out, uint16_t request_id, ProtocolStatus status);
// A whole response: FCGI_STDOUT records carrying `head` then `body`, the empty FCGI_STDOUT
// that ends the stream, and FCGI_END_REQUEST (request complete).
std::string encode_response(uint16_t request_id, std::string_view head, std::string_view body);

}  // namespace kagi::fcgi
