// Fuzzes server::RequestReader, the HTTP front end's bytes → requests path: whatever the
// bytes and however they are cut into reads, it never crashes, never holds more than its
// bound, fails only with 400 / 413 / 431, and every request it returns is within the limits.
//
// Input layout: byte 0 picks max_header_bytes (1024 + 64 * (b % 32)), byte 1 max_body_bytes
// (b * 16), byte 2 the size of each read (1 + b); the rest is what the client sends.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <kagi/server/request_reader.hpp>
#include "fuzz_check.hpp"

using kagi::server::ReaderLimits;
using kagi::server::RequestReader;
using Status = RequestReader::Status;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const ReaderLimits limits{.max_header_bytes = 1024 + 64 * size_t{data[0] % 32u},
                            .max_body_bytes = uint64_t{data[1]} * 16};
  const size_t step = 1 + size_t{data[2]};
  std::string_view input(reinterpret_cast<const char*>(data) + 3, size - 3);

  RequestReader reader(limits);
  int requests = 0;
  // Every request takes at least one byte of input, so the loop is bounded by its size.
  for (size_t round = 0; round <= input.size() + 1; ++round) {
    const size_t taken = reader.feed(input.substr(0, std::min(step, input.size())));
    input.remove_prefix(taken);
    FUZZ_CHECK(reader.buffered() <= reader.capacity());
    Status s = reader.parse();
    while (s == Status::kHeader) {
      FUZZ_CHECK(reader.version() == 10 || reader.version() == 11);
      s = reader.parse();
      FUZZ_CHECK(s != Status::kHeader);  // reported once per request
    }
    if (s == Status::kError) {
      const int e = reader.error_status();
      FUZZ_CHECK(e == 400 || e == 413 || e == 431);
      FUZZ_CHECK(!reader.error_message().empty());
      FUZZ_CHECK(reader.parse() == Status::kError);  // sticky until next()
      return 0;
    }
    if (s == Status::kDone) {
      ++requests;
      kagi::http::Request req = reader.take();
      FUZZ_CHECK(!req.method.empty());
      FUZZ_CHECK(!req.target.empty());
      FUZZ_CHECK(req.body.size() <= limits.max_body_bytes);
      FUZZ_CHECK(reader.version() == 10 || reader.version() == 11);
      // Exactly one Host on HTTP/1.1; Transfer-Encoding only as a single "chunked".
      size_t hosts = 0, codings = 0;
      for (const auto& [name, value] : req.headers.items()) {
        if (kagi::http::iequals(name, "Host")) ++hosts;
        if (kagi::http::iequals(name, "Transfer-Encoding")) ++codings;
      }
      FUZZ_CHECK(hosts <= 1 && (hosts == 1 || reader.version() == 10));
      FUZZ_CHECK(codings <= 1);
      reader.next();
      continue;
    }
    // Needs more: done when the client has nothing more to send, or the buffer cannot
    // take more (that never happens while a request is incomplete).
    if (input.empty()) break;
    FUZZ_CHECK(taken > 0);
  }
  FUZZ_CHECK(requests <= static_cast<int>(size));
  return 0;
}
