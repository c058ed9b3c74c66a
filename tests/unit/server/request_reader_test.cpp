// RequestReader (framework/kagi/server/request_reader.cpp): bytes → requests, bounded.
#include <kagi/server/request_reader.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kagi::server {
namespace {

using Status = RequestReader::Status;

constexpr ReaderLimits kLimits{.max_header_bytes = 1024, .max_body_bytes = 4096};

// Feeds `bytes` one piece of `step` bytes at a time, parsing after each; returns the last
// status other than kNeedMore / kHeader (or kNeedMore if there was none).
Status feed_all(RequestReader& r, std::string_view bytes, size_t step = 1 << 20) {
  Status last = Status::kNeedMore;
  while (!bytes.empty()) {
    size_t n = r.feed(bytes.substr(0, std::min(step, bytes.size())));
    bytes.remove_prefix(n);
    last = r.parse();
    if (last == Status::kDone || last == Status::kError) return last;
    if (n == 0) break;  // buffer full and parse() did not fail: caller checks
  }
  return last == Status::kHeader ? Status::kNeedMore : last;
}

struct Outcome {
  Status status;
  int error = 0;
};

Outcome read_one(std::string_view bytes, size_t step = 1 << 20) {
  RequestReader r(kLimits);
  Status s = feed_all(r, bytes, step);
  return {s, s == Status::kError ? r.error_status() : 0};
}

TEST(RequestReader, ReadsARequestWithItsBody) {
  RequestReader r(kLimits);
  r.feed("POST /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello");
  ASSERT_EQ(r.parse(), Status::kDone);
  http::Request req = r.take();
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/a?b=1");
  EXPECT_EQ(req.body, "hello");
  EXPECT_EQ(req.headers.get("x-a").value_or(""), "1");
  EXPECT_TRUE(r.keep_alive());
  EXPECT_EQ(r.version(), 11u);
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(RequestReader, ByteByByteGivesTheSameRequest) {
  const std::string raw =
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;a=b\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n";
  RequestReader r(kLimits);
  int headers = 0;
  Status s = Status::kNeedMore;
  for (char c : raw) {
    ASSERT_EQ(r.feed(std::string_view(&c, 1)), 1u);
    s = r.parse();
    if (s == Status::kHeader) ++headers;
    ASSERT_NE(s, Status::kError) << r.error_message();
  }
  EXPECT_EQ(s, Status::kDone);
  EXPECT_EQ(headers, 1) << "kHeader is reported once";
  EXPECT_EQ(r.take().body, "abcde");
}

TEST(RequestReader, LastChunkAloneInPieces) {
  // Found by fuzz_request: Beast 1.74 asserted on "0\r\n" then "\r" (debug builds).
  for (size_t step : {size_t{1}, size_t{2}, size_t{3}, size_t{4}}) {
    RequestReader r(kLimits);
    EXPECT_EQ(
        feed_all(r, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 step),
        Status::kDone)
        << step;
    EXPECT_EQ(r.take().body, "");
  }
}

TEST(RequestReader, TrailerFieldsNeverBecomeHeaders) {
  // Found by fuzz_request: Beast adds a chunked body's trailer fields to the header, after
  // the header checks ran, so a trailer could add a second Host, a Cookie or a CSRF
  // token. They are dropped (RFC 9110 lets a recipient discard trailers).
  RequestReader r(kLimits);
  EXPECT_EQ(feed_all(r,
                     "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n0\r\nHost: evil\r\nCookie: kagi_csrf=planted\r\n"
                     "X-CSRF-Token: planted\r\n\r\n",
                     7),
            Status::kDone);
  const kagi::http::Request req = r.take();
  EXPECT_EQ(req.body, "abc");
  EXPECT_EQ(req.headers.get("Host").value_or(""), "x");
  EXPECT_FALSE(req.headers.has("Cookie"));
  EXPECT_FALSE(req.headers.has("X-CSRF-Token"));
  size_t hosts = 0;
  for (const auto& [name, value] : req.headers.items()) hosts += name == "Host" ? 1 : 0;
  EXPECT_EQ(hosts, 1u);
}

TEST(RequestReader, PipelinedRequestsStayBuffered) {
  RequestReader r(kLimits);
  r.feed("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3");
  ASSERT_EQ(r.parse(), Status::kDone);
  EXPECT_EQ(r.take().target, "/1");
  EXPECT_EQ(r.parse(), Status::kDone) << "repeats until next()";
  r.next();
  ASSERT_EQ(r.parse(), Status::kDone);
  EXPECT_EQ(r.take().target, "/2");
  r.next();
  EXPECT_EQ(r.parse(), Status::kNeedMore);
  r.feed(" HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.parse(), Status::kDone);
  EXPECT_EQ(r.take().target, "/3");
}

TEST(RequestReader, HeaderIsReportedBeforeTheBody) {
  RequestReader r(kLimits);
  r.feed("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  ASSERT_EQ(r.parse(), Status::kHeader);
  EXPECT_TRUE(r.expects_continue());
  EXPECT_EQ(r.parse(), Status::kNeedMore);
  r.feed("abc");
  EXPECT_EQ(r.parse(), Status::kDone);
}

TEST(RequestReader, Http10WithoutHostIsFine) {
  RequestReader r(kLimits);
  r.feed("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(r.parse(), Status::kDone);
  EXPECT_FALSE(r.keep_alive());
  EXPECT_EQ(r.version(), 10u);
}

TEST(RequestReader, RefusesSmugglingFraming) {
  const std::string post = "POST / HTTP/1.1\r\nHost: x\r\n";
  for (const std::string& bad : {
           post + "Transfer-Encoding: gzip\r\n\r\n",
           post + "Transfer-Encoding: identity\r\n\r\n",
           post + "Transfer-Encoding: chunked, gzip\r\n\r\n",
           post + "Transfer-Encoding: gzip, chunked\r\n\r\n",
           post + "Transfer-Encoding: chunked, chunked\r\n\r\n",
           post + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
           post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
           post + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
           post + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
           post + "Transfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n",
           std::string("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
           post + "X-A: 1\r\n folded\r\n\r\n",
           post + "X-A: 1\r\n\tfolded\r\n\r\n",
           std::string("GET / HTTP/1.1\r\n Host: x\r\n\r\n"),
           std::string("GET / HTTP/1.1\r\n\r\n"),
           std::string("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
           std::string("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"),
           std::string("GET / HTTP/1.1\r\nHost : x\r\n\r\n"),
           std::string("BLAH\x01 / HTTP/9\r\n\r\n"),
       }) {
    for (size_t step : {size_t{1}, size_t{7}, size_t{1} << 20}) {
      Outcome o = read_one(bad, step);
      EXPECT_EQ(o.status, Status::kError) << bad << " step " << step;
      EXPECT_EQ(o.error, 400) << bad << " step " << step;
    }
  }
}

TEST(RequestReader, BareLineFeedsNeverMakeARequest) {
  // Whole, Beast sees the bad line ending (400); in pieces it keeps waiting for a CRLF
  // CRLF, which the header limit or the deadline ends.
  for (size_t step : {size_t{1}, size_t{7}, size_t{1} << 20}) {
    Outcome o = read_one("GET / HTTP/1.1\nHost: x\n\n", step);
    EXPECT_NE(o.status, Status::kDone) << step;
    if (o.status == Status::kError) {
      EXPECT_EQ(o.error, 400);
    }
  }
}

TEST(RequestReader, AcceptsTheChunkedSpellingsItShould) {
  for (const std::string& good : {
           std::string("Transfer-Encoding: chunked\r\n"),
           std::string("Transfer-Encoding: Chunked\r\n"),
           std::string("transfer-encoding:  chunked \r\n"),
       }) {
    Outcome o = read_one("POST / HTTP/1.1\r\nHost: x\r\n" + good + "\r\n0\r\n\r\n");
    EXPECT_EQ(o.status, Status::kDone) << good;
  }
}

TEST(RequestReader, LongHeaderIs431) {
  Outcome o =
      read_one("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
  EXPECT_EQ(o.error, 431);
  // An endless one: the buffer fills, then 431, whatever the piece size.
  for (size_t step : {size_t{1}, size_t{100}, size_t{1} << 20}) {
    RequestReader r(kLimits);
    EXPECT_EQ(feed_all(r, "GET / HTTP/1.1\r\nX: " + std::string(1 << 20, 'a'), step),
              Status::kError);
    EXPECT_EQ(r.error_status(), 431);
    EXPECT_LE(r.buffered(), r.capacity());
  }
}

TEST(RequestReader, EndlessChunkExtensionIs400) {
  for (size_t step : {size_t{1}, size_t{100}, size_t{1} << 20}) {
    RequestReader r(kLimits);
    std::string raw = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;";
    raw += std::string(1 << 20, 'e');
    EXPECT_EQ(feed_all(r, raw, step), Status::kError) << step;
    EXPECT_EQ(r.error_status(), 400);
    EXPECT_LE(r.buffered(), r.capacity());
  }
}

TEST(RequestReader, EndlessTrailerIs400) {
  for (size_t step : {size_t{1}, size_t{100}, size_t{1} << 20}) {
    RequestReader r(kLimits);
    std::string raw =
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-T: ";
    raw += std::string(1 << 20, 't');
    EXPECT_EQ(feed_all(r, raw, step), Status::kError) << step;
    EXPECT_EQ(r.error_status(), 400);
  }
}

TEST(RequestReader, ChunkedBodyLargerThanTheBufferIsRead) {
  // The body is bounded by max_body_bytes, not by the buffer.
  RequestReader r({.max_header_bytes = 1024, .max_body_bytes = 1 << 20});
  std::string raw = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) raw += "1000\r\n" + std::string(0x1000, 'a' + i) + "\r\n";
  raw += "0\r\n\r\n";
  ASSERT_EQ(feed_all(r, raw, 3000), Status::kDone) << r.error_message();
  EXPECT_EQ(r.take().body.size(), 20u * 0x1000);
}

TEST(RequestReader, BodyOverTheLimitIs413) {
  EXPECT_EQ(read_one("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n").error, 413);
  EXPECT_EQ(read_one("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "1001\r\n")
                .error,
            413);
  std::string raw = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) raw += "400\r\n" + std::string(0x400, 'x') + "\r\n";
  EXPECT_EQ(read_one(raw, 100).error, 413);
}

TEST(RequestReader, PrepareNeverGoesBeyondTheBound) {
  RequestReader r(kLimits);
  size_t total = 0;
  for (int i = 0; i < 1000; ++i) {
    auto b = r.prepare(4096);
    if (b.size() == 0) break;
    r.commit(b.size());
    total += b.size();
  }
  EXPECT_EQ(total, r.capacity());
  EXPECT_EQ(r.prepare().size(), 0u);
}

}  // namespace
}  // namespace kagi::server
