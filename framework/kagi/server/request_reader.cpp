#include <kagi/server/request_reader.hpp>

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <cstring>
#include <limits>

namespace kagi::server {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

// The buffer holds a whole header block (or chunk-size line, or trailer) of up to
// max_header_bytes plus this much of what follows it, so that one read never has to wait
// for the parser to consume.
constexpr size_t kReadSlack = 16384;

std::string_view to_std(beast::string_view s) { return {s.data(), s.size()}; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A line of the header block that starts with a space or a tab continues the line before
// (obs-fold, RFC 9112 section 5.2), or sits between the request line and the first field.
bool has_folded_line(std::string_view header) {
  for (size_t at = header.find('\n'); at != header.npos && at + 1 < header.size();
       at = header.find('\n', at + 1)) {
    if (header[at + 1] == ' ' || header[at + 1] == '\t') return true;
  }
  return false;
}

}  // namespace

RequestReader::RequestReader(ReaderLimits limits)
    : limits_(limits), capacity_(limits.max_header_bytes + kReadSlack), buffer_(capacity_) {
  next();
}

void RequestReader::next() {
  released_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(
      std::min<size_t>(limits_.max_header_bytes, std::numeric_limits<uint32_t>::max())));
  parser_->body_limit(limits_.max_body_bytes);
  status_ = Status::kNeedMore;
  header_reported_ = false;
  headers_ = http::Headers();
  error_status_ = 0;
  error_message_.clear();
}

boost::asio::mutable_buffer RequestReader::prepare(size_t most) {
  const size_t room = capacity_ - std::min(capacity_, buffer_.size());
  return buffer_.prepare(std::min(most, room));
}

void RequestReader::commit(size_t n) { buffer_.commit(n); }

size_t RequestReader::feed(std::string_view bytes) {
  size_t taken = 0;
  while (taken < bytes.size()) {
    auto room = prepare(bytes.size() - taken);
    if (room.size() == 0) break;
    std::memcpy(room.data(), bytes.data() + taken, room.size());
    commit(room.size());
    taken += room.size();
  }
  return taken;
}

RequestReader::Status RequestReader::fail(int status, std::string message) {
  error_status_ = status;
  error_message_ = std::move(message);
  return status_ = Status::kError;
}

bool RequestReader::check_header(std::string_view raw) {
  const auto& req = parser_->get();
  if (has_folded_line(raw)) {
    fail(400, "A header line starts with a space or a tab (obsolete line folding is refused).");
    return false;
  }
  const size_t hosts = req.count(bhttp::field::host);
  if (hosts > 1 || (hosts == 0 && req.version() >= 11)) {
    fail(400, "An HTTP/1.1 request needs exactly one Host header.");
    return false;
  }
  const size_t codings = req.count(bhttp::field::transfer_encoding);
  if (codings == 0) return true;
  if (codings > 1 || req.version() < 11 || req.count(bhttp::field::content_length) > 0 ||
      !http::iequals(trim_ows(to_std(req[bhttp::field::transfer_encoding])), "chunked")) {
    fail(400,
         "Transfer-Encoding must be exactly \"chunked\" (HTTP/1.1 only, once, without "
         "Content-Length).");
    return false;
  }
  return true;
}

RequestReader::Status RequestReader::parse() {
  if (status_ == Status::kDone || status_ == Status::kError) return status_;
  while (!parser_->is_done()) {
    const auto data = buffer_.data();
    if (data.size() == 0) break;
    // Boost 1.74 asserts (in builds without NDEBUG) when it parses a chunked body's last
    // chunk again from fewer than 5 bytes ("0\r\n" + "\r" after a need-more). What is left
    // of a complete chunked body is never shorter than "0\r\n\r\n": wait for 5 bytes.
    if (parser_->is_header_done() && parser_->chunked() && data.size() < 5) break;
    const bool had_header = parser_->is_header_done();
    beast::error_code ec;
    const size_t used = parser_->put(data, ec);
    // Beast takes a header block in one put(), from its first byte: `used` bytes are it.
    if (!had_header && parser_->is_header_done()) {
      if (!check_header({static_cast<const char*>(data.data()), used})) return status_;
      // The header block's fields, taken now: Beast adds a chunked body's trailer fields to
      // the same list later (next to fields of the same name), after these checks ran, so a
      // trailer could add a second Host, a Cookie or a CSRF token. Trailers are dropped (RFC
      // 9110 lets a recipient discard them).
      for (const auto& field : parser_->get()) {
        headers_.add(std::string(field.name_string()), std::string(field.value()));
      }
    }
    buffer_.consume(used);
    if (ec == bhttp::error::need_more) break;
    if (ec == bhttp::error::header_limit) {
      return fail(431, "The request headers are larger than " +
                           std::to_string(limits_.max_header_bytes) + " bytes.");
    }
    if (ec == bhttp::error::body_limit) {
      return fail(413, "The request body is larger than " + std::to_string(limits_.max_body_bytes) +
                           " bytes.");
    }
    if (ec) return fail(400, "The request is not valid HTTP/1.1 (" + ec.message() + ").");
    if (used == 0) break;
  }
  if (parser_->is_done()) return status_ = Status::kDone;
  if (!parser_->is_header_done()) return status_ = Status::kNeedMore;
  // Inside a chunked body Beast waits for a whole chunk-size line, or a whole trailer,
  // however long: bounded here.
  if (buffer_.size() >= limits_.max_header_bytes) {
    return fail(400, "A chunk-size line or the trailer of the chunked body is longer than " +
                         std::to_string(limits_.max_header_bytes) + " bytes.");
  }
  if (!header_reported_) {
    header_reported_ = true;
    return status_ = Status::kHeader;
  }
  return status_ = Status::kNeedMore;
}

bool RequestReader::head() const {
  if (released_) return kept_head_;
  return parser_->get().method() == bhttp::verb::head;
}

unsigned RequestReader::version() const {
  if (released_) return kept_version_;
  return parser_->is_header_done() ? parser_->get().version() : 11;
}

bool RequestReader::keep_alive() const {
  if (released_) return kept_keep_alive_;
  return parser_->is_header_done() && parser_->get().keep_alive();
}

void RequestReader::release_parked() {
  if (released_ || status_ != Status::kDone) return;
  kept_head_ = head();
  kept_version_ = version();
  kept_keep_alive_ = keep_alive();
  released_ = true;
  parser_.reset();
  headers_ = http::Headers();
  if (buffer_.size() == 0) buffer_.shrink_to_fit();
}

bool RequestReader::expects_continue() const {
  if (released_) return false;
  return parser_->is_header_done() &&
         beast::iequals(parser_->get()[bhttp::field::expect], "100-continue");
}

http::Request RequestReader::take() {
  auto& req = parser_->get();
  http::Request request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.headers = std::move(headers_);  // the header block's fields only (see parse())
  headers_ = http::Headers();
  request.body = std::move(req.body());
  return request;
}

}  // namespace kagi::server
