#include <kagi/fcgi/protocol.hpp>

#include <algorithm>

namespace kagi::fcgi {
namespace {

constexpr size_t kHeaderSize = 8;
constexpr size_t kMaxContent = 65535;
// Response records carry at most this much: a multiple of 8, so only the last one is padded.
constexpr size_t kChunk = 32768;

uint8_t byte_at(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

// A name-value pair length: one byte below 128, else four bytes with the top bit set.
bool read_length(std::string_view s, size_t& pos, size_t& out) {
  if (pos >= s.size()) return false;
  if ((byte_at(s, pos) & 0x80) == 0) {
    out = byte_at(s, pos++);
    return true;
  }
  if (s.size() - pos < 4) return false;
  out = (static_cast<size_t>(byte_at(s, pos) & 0x7f) << 24) |
        (static_cast<size_t>(byte_at(s, pos + 1)) << 16) |
        (static_cast<size_t>(byte_at(s, pos + 2)) << 8) | byte_at(s, pos + 3);
  pos += 4;
  return true;
}

// Calls fn(name, value) per pair; false when the encoding is cut or overruns.
template <typename Fn>
bool for_each_pair(std::string_view s, Fn fn) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t name_len = 0, value_len = 0;
    if (!read_length(s, pos, name_len) || !read_length(s, pos, value_len)) return false;
    if (name_len > s.size() - pos || value_len > s.size() - pos - name_len) return false;
    fn(s.substr(pos, name_len), s.substr(pos + name_len, value_len));
    pos += name_len + value_len;
  }
  return true;
}

}  // namespace

void append_name_value(std::string& out, std::string_view name, std::string_view value) {
  for (size_t n : {name.size(), value.size()}) {
    if (n < 128) {
      out += static_cast<char>(n);
    } else {
      out += static_cast<char>(0x80 | ((n >> 24) & 0x7f));
      out += static_cast<char>((n >> 16) & 0xff);
      out += static_cast<char>((n >> 8) & 0xff);
      out += static_cast<char>(n & 0xff);
    }
  }
  out.append(name).append(value);
}

void append_record(std::string& out, RecordType type, uint16_t request_id,
                   std::string_view content) {
  const size_t padding = (8 - content.size() % 8) % 8;
  const char header[kHeaderSize] = {static_cast<char>(kVersion),
                                    static_cast<char>(type),
                                    static_cast<char>(request_id >> 8),
                                    static_cast<char>(request_id & 0xff),
                                    static_cast<char>(content.size() >> 8),
                                    static_cast<char>(content.size() & 0xff),
                                    static_cast<char>(padding),
                                    0};
  out.append(header, kHeaderSize);
  out.append(content);
  out.append(padding, '\0');
}

void append_end_request(std::string& out, uint16_t request_id, ProtocolStatus status) {
  const char body[8] = {0, 0, 0, 0, static_cast<char>(status), 0, 0, 0};
  append_record(out, RecordType::kEndRequest, request_id, std::string_view(body, 8));
}

std::string encode_response(uint16_t request_id, std::string_view head, std::string_view body) {
  std::string out;
  const size_t total = head.size() + body.size();
  out.reserve(total + (total / kChunk + 3) * 16);
  for (std::string_view part : {head, body}) {
    for (size_t at = 0; at < part.size(); at += kChunk) {
      append_record(out, RecordType::kStdout, request_id, part.substr(at, kChunk));
    }
  }
  append_record(out, RecordType::kStdout, request_id, {});
  append_end_request(out, request_id, ProtocolStatus::kRequestComplete);
  return out;
}

RequestReader::Status RequestReader::fail(std::string message) {
  error_ = std::move(message);
  return Status::kError;
}

RequestReader::Status RequestReader::advance() {
  if (!error_.empty()) return Status::kError;
  while (phase_ != Phase::kDone) {
    std::string_view rest = unparsed();
    if (rest.size() < kHeaderSize) break;
    const uint8_t version = byte_at(rest, 0);
    if (version != kVersion) {
      return fail("FastCGI record of version " + std::to_string(version) + " (only 1 exists)");
    }
    const auto type = static_cast<RecordType>(byte_at(rest, 1));
    const uint16_t id = static_cast<uint16_t>((byte_at(rest, 2) << 8) | byte_at(rest, 3));
    const size_t length = (static_cast<size_t>(byte_at(rest, 4)) << 8) | byte_at(rest, 5);
    const size_t padding = byte_at(rest, 6);
    if (rest.size() < kHeaderSize + length + padding) break;
    pos_ += kHeaderSize + length + padding;
    if (!on_record(type, id, rest.substr(kHeaderSize, length))) return Status::kError;
  }
  // Consumed bytes are dropped once they are most of the buffer, so it never grows past
  // one record beyond what the request keeps.
  if (pos_ > 0 && pos_ * 2 >= in_.size()) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
  if (phase_ != Phase::kDone) return Status::kNeedMore;
  // Records after a complete request are left for the next one, except an abort of this
  // one (the web server's client went away while the request is parked).
  for (std::string_view rest = unparsed(); rest.size() >= kHeaderSize;) {
    const size_t whole = kHeaderSize +
                         ((static_cast<size_t>(byte_at(rest, 4)) << 8) | byte_at(rest, 5)) +
                         byte_at(rest, 6);
    if (rest.size() < whole) break;
    const uint16_t id = static_cast<uint16_t>((byte_at(rest, 2) << 8) | byte_at(rest, 3));
    if (static_cast<RecordType>(byte_at(rest, 1)) == RecordType::kAbortRequest &&
        id == request_id_) {
      aborted_ = true;
    }
    rest.remove_prefix(whole);
  }
  return Status::kComplete;
}

bool RequestReader::on_record(RecordType type, uint16_t id, std::string_view content) {
  if (id == 0) {  // management records
    if (type == RecordType::kGetValues) {
      std::string result;
      if (!for_each_pair(content, [&](std::string_view name, std::string_view) {
            // Only what kagi can say for sure; unknown names are left out, as the spec asks.
            if (name == "FCGI_MPXS_CONNS") {
              append_name_value(result, name, "0");
            }
          })) {
        error_ = "malformed FCGI_GET_VALUES record";
        return false;
      }
      append_record(replies_, RecordType::kGetValuesResult, 0, result.substr(0, kMaxContent));
    } else {
      const char body[8] = {static_cast<char>(type), 0, 0, 0, 0, 0, 0, 0};
      append_record(replies_, RecordType::kUnknownType, 0, std::string_view(body, 8));
    }
    return true;
  }
  switch (type) {
    case RecordType::kBeginRequest: {
      if (content.size() < 8) {
        error_ = "FCGI_BEGIN_REQUEST shorter than 8 bytes";
        return false;
      }
      const uint16_t role = static_cast<uint16_t>((byte_at(content, 0) << 8) | byte_at(content, 1));
      if (phase_ != Phase::kIdle) {
        // nginx and Apache never multiplex; a second request on the connection is refused.
        if (id != request_id_) append_end_request(replies_, id, ProtocolStatus::kCantMpxConn);
        return true;
      }
      if (role != kRoleResponder) {
        append_end_request(replies_, id, ProtocolStatus::kUnknownRole);
        return true;
      }
      reset_request();
      request_id_ = id;
      keep_conn_ = (byte_at(content, 2) & kFlagKeepConn) != 0;
      phase_ = Phase::kParams;
      return true;
    }
    case RecordType::kAbortRequest:
      if (phase_ == Phase::kIdle || id != request_id_) return true;  // nothing of ours
      aborted_ = true;
      if (phase_ != Phase::kDone) {
        // Still being read: nobody will answer it but us, now.
        append_end_request(replies_, id, ProtocolStatus::kRequestComplete);
        reset_request();
      }
      return true;
    case RecordType::kParams:
      if (id != request_id_ || phase_ == Phase::kIdle) return true;  // stray: ignored
      if (phase_ != Phase::kParams) {
        error_ = "FCGI_PARAMS after the end of the params";
        return false;
      }
      if (content.empty()) {
        phase_ = Phase::kBody;
        if (params_too_large_) return true;
        return decode_params();
      }
      if (params_raw_.size() + content.size() > limits_.max_params_bytes) {
        params_too_large_ = true;
        params_raw_.clear();
        params_raw_.shrink_to_fit();
      }
      if (!params_too_large_) params_raw_.append(content);
      return true;
    case RecordType::kStdin:
      if (id != request_id_ || phase_ == Phase::kIdle) return true;
      if (phase_ != Phase::kBody) {
        error_ = "FCGI_STDIN before the end of the params";
        return false;
      }
      if (content.empty()) {
        phase_ = Phase::kDone;
        return true;
      }
      if (body_.size() + content.size() > limits_.max_body_bytes) {
        body_too_large_ = true;
        body_.clear();
        body_.shrink_to_fit();
      }
      if (!body_too_large_) body_.append(content);
      return true;
    default:
      return true;  // FCGI_DATA (filter role) and others are not for a responder
  }
}

bool RequestReader::decode_params() {
  // Sized first, so that the views taken while appending stay valid (no reallocation).
  size_t bytes = 0;
  bool ok = for_each_pair(params_raw_, [&](std::string_view name, std::string_view value) {
    bytes += name.size() + value.size() + 2;
  });
  params_text_.clear();
  params_text_.reserve(bytes);
  params_.clear();
  envp_.clear();
  ok = ok && for_each_pair(params_raw_, [&](std::string_view name, std::string_view value) {
         const size_t at = params_text_.size();
         params_text_.append(name).append(1, '=').append(value).append(1, '\0');
         char* entry = params_text_.data() + at;
         params_.emplace_back(entry, name.size() + 1 + value.size());
         envp_.push_back(entry);  // a NUL inside a value ends it there, as CGI's environment does
       });
  params_raw_.clear();
  envp_.push_back(nullptr);
  if (!ok) error_ = "malformed name-value pair in FCGI_PARAMS";
  return ok;
}

void RequestReader::reset_request() {
  phase_ = Phase::kIdle;
  request_id_ = 0;
  keep_conn_ = false;
  aborted_ = false;
  params_too_large_ = false;
  body_too_large_ = false;
  params_raw_.clear();
  params_text_.clear();
  params_.clear();
  envp_.assign(1, nullptr);
  body_.clear();
}

bool RequestReader::record_ready() const {
  std::string_view rest = unparsed();
  if (rest.size() < kHeaderSize) return false;
  const size_t length = (static_cast<size_t>(byte_at(rest, 4)) << 8) | byte_at(rest, 5);
  return rest.size() >= kHeaderSize + length + byte_at(rest, 6);
}

void RequestReader::release_parked() {
  params_raw_ = std::string();
  params_text_ = std::string();
  params_ = std::vector<std::string_view>();
  envp_ = std::vector<char*>{nullptr};
  body_ = std::string();
  if (pos_ > 0) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
  in_.shrink_to_fit();
}

void RequestReader::next() {
  reset_request();
  if (pos_ > 0) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
}

}  // namespace kagi::fcgi
