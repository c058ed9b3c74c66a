// Fuzzes the FastCGI record reader (fcgi/protocol.hpp), which reads what the web server (or
// anyone who reaches the socket) sends. Byte 0 picks the size of each read (1..64), byte 1 the
// limits; the rest is the connection's bytes. Invariants:
//  - the same bytes give the same requests and the same verdict whether they arrive at once
//    or in reads of any size;
//  - a complete request stays within its limits (or says it went over them);
//  - a request rebuilt from what was read (BEGIN_REQUEST, its params as name-value pairs,
//    its body as FCGI_STDIN) reads back to the same params and body.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/fcgi/protocol.hpp>
#include "fuzz_check.hpp"

using kagi::fcgi::ReaderLimits;
using kagi::fcgi::RecordType;
using kagi::fcgi::RequestReader;

namespace {

struct Outcome {
  bool error = false;
  std::vector<std::string> params;
  std::string body;
  bool params_too_large = false;
  bool body_too_large = false;
  bool operator==(const Outcome&) const = default;
};

std::vector<Outcome> read_all(std::string_view input, size_t chunk, const ReaderLimits& limits) {
  RequestReader reader(limits);
  std::vector<Outcome> out;
  size_t offset = 0;
  for (int steps = 0; steps < 100000; ++steps) {
    const RequestReader::Status status = reader.advance();
    reader.replies().clear();
    if (status == RequestReader::Status::kComplete) {
      Outcome o;
      o.params.assign(reader.params().begin(), reader.params().end());
      o.body = reader.body();
      o.params_too_large = reader.params_too_large();
      o.body_too_large = reader.body_too_large();
      out.push_back(std::move(o));
      reader.next();
      continue;
    }
    if (status == RequestReader::Status::kError) {
      out.push_back(Outcome{.error = true});
      break;
    }
    if (offset >= input.size()) break;
    const size_t n = std::min(chunk, input.size() - offset);
    reader.append(input.data() + offset, n);
    offset += n;
  }
  return out;
}

// The request a well-behaved web server would send for `o` (request id 1).
std::string rebuild(const Outcome& o) {
  std::string wire;
  const char begin[8] = {0, 1, 0, 0, 0, 0, 0, 0};  // role responder, no flags
  kagi::fcgi::append_record(wire, RecordType::kBeginRequest, 1, std::string_view(begin, 8));
  std::string pairs;
  for (const std::string& p : o.params) {
    const size_t eq = p.find('=');
    const std::string_view name = std::string_view(p).substr(0, eq);
    const std::string_view value =
        eq == std::string::npos ? std::string_view() : std::string_view(p).substr(eq + 1);
    kagi::fcgi::append_name_value(pairs, name, value);
  }
  for (size_t at = 0; at < pairs.size(); at += 65535) {
    kagi::fcgi::append_record(wire, RecordType::kParams, 1,
                              std::string_view(pairs).substr(at, 65535));
  }
  kagi::fcgi::append_record(wire, RecordType::kParams, 1, {});
  for (size_t at = 0; at < o.body.size(); at += 65535) {
    kagi::fcgi::append_record(wire, RecordType::kStdin, 1,
                              std::string_view(o.body).substr(at, 65535));
  }
  kagi::fcgi::append_record(wire, RecordType::kStdin, 1, {});
  return wire;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 256 * 1024) return 0;
  const size_t chunk = 1 + data[0] % 64;
  ReaderLimits limits;
  limits.max_params_bytes = 64 * (1 + data[1] % 32);
  limits.max_body_bytes = 16 * (data[1] / 8);
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  const std::vector<Outcome> whole = read_all(input, input.size() + 1, limits);
  const std::vector<Outcome> pieces = read_all(input, chunk, limits);
  FUZZ_CHECK(whole == pieces);

  for (const Outcome& o : whole) {
    if (o.error) continue;
    FUZZ_CHECK(o.body.size() <= limits.max_body_bytes);
    if (o.body_too_large) FUZZ_CHECK(o.body.empty());
    if (o.params_too_large) continue;
    size_t bytes = 0;
    for (const std::string& p : o.params) bytes += p.size();
    FUZZ_CHECK(bytes <= limits.max_params_bytes);
    if (o.body_too_large) continue;
    ReaderLimits roomy;
    roomy.max_params_bytes = 2 * limits.max_params_bytes + 8 * o.params.size() + 64;
    roomy.max_body_bytes = limits.max_body_bytes;
    const std::vector<Outcome> again = read_all(rebuild(o), 64, roomy);
    FUZZ_CHECK(again.size() == 1);
    FUZZ_CHECK(again[0] == o);
  }
  return 0;
}
