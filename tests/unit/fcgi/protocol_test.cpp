#include <kagi/fcgi/protocol.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kagi::fcgi {
namespace {

// The web server's side, written independently of the code under test.
std::string record(uint8_t type, uint16_t id, const std::string& content, uint8_t pad = 0) {
  std::string out;
  out += static_cast<char>(1);
  out += static_cast<char>(type);
  out += static_cast<char>(id >> 8);
  out += static_cast<char>(id & 0xff);
  out += static_cast<char>(content.size() >> 8);
  out += static_cast<char>(content.size() & 0xff);
  out += static_cast<char>(pad);
  out += '\0';
  return out + content + std::string(pad, '\0');
}

std::string begin(uint16_t id, bool keep, uint16_t role = 1) {
  std::string body(8, '\0');
  body[0] = static_cast<char>(role >> 8);
  body[1] = static_cast<char>(role & 0xff);
  body[2] = keep ? 1 : 0;
  return record(1, id, body);
}

std::string pair(const std::string& name, const std::string& value) {
  auto len = [](size_t n) {
    if (n < 128) return std::string(1, static_cast<char>(n));
    return std::string{static_cast<char>(0x80 | (n >> 24)), static_cast<char>((n >> 16) & 0xff),
                       static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
  };
  return len(name.size()) + len(value.size()) + name + value;
}

// A whole request as nginx sends it: params split over two records, padding on one, the
// body in two records.
std::string full_request(uint16_t id, const std::string& body, bool keep = true) {
  std::string params = pair("REQUEST_METHOD", "POST") + pair("REQUEST_URI", "/x?y=1");
  std::string long_value(300, 'v');
  std::string more = pair("HTTP_X_LONG", long_value);
  std::string out = begin(id, keep);
  out += record(4, id, params, 3);
  out += record(4, id, more);
  out += record(4, id, "");
  if (!body.empty()) {
    out += record(5, id, body.substr(0, body.size() / 2), 5);
    out += record(5, id, body.substr(body.size() / 2));
  }
  out += record(5, id, "");
  return out;
}

struct Parsed {
  uint8_t type;
  uint16_t id;
  std::string content;
};

std::vector<Parsed> parse_records(const std::string& bytes) {
  std::vector<Parsed> out;
  size_t pos = 0;
  while (pos + 8 <= bytes.size()) {
    auto b = [&](size_t i) { return static_cast<uint8_t>(bytes[pos + i]); };
    EXPECT_EQ(b(0), 1);
    const size_t len = (b(4) << 8) | b(5);
    const size_t pad = b(6);
    EXPECT_EQ((len + pad) % 8, 0u) << "records are padded to 8 bytes";
    out.push_back({b(1), static_cast<uint16_t>((b(2) << 8) | b(3)), bytes.substr(pos + 8, len)});
    pos += 8 + len + pad;
  }
  EXPECT_EQ(pos, bytes.size()) << "a record was cut";
  return out;
}

TEST(RequestReader, CompleteOnlyAtTheLastByteWhereverTheBytesAreCut) {
  const std::string bytes = full_request(1, "a=b&c=d");
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    RequestReader r;
    r.append(bytes.data(), cut);
    const auto first = r.advance();
    if (cut < bytes.size()) {
      ASSERT_EQ(first, RequestReader::Status::kNeedMore) << "cut at " << cut;
      EXPECT_EQ(r.started(), cut > 0) << "cut at " << cut;
    }
    r.append(bytes.data() + cut, bytes.size() - cut);
    ASSERT_EQ(r.advance(), RequestReader::Status::kComplete) << "cut at " << cut;
    EXPECT_EQ(r.body(), "a=b&c=d");
    ASSERT_EQ(r.params().size(), 3u);
    EXPECT_EQ(r.params()[0], "REQUEST_METHOD=POST");
    EXPECT_EQ(r.params()[1], "REQUEST_URI=/x?y=1");
    EXPECT_EQ(r.params()[2], "HTTP_X_LONG=" + std::string(300, 'v'));
    EXPECT_EQ(r.request_id(), 1);
    EXPECT_TRUE(r.keep_conn());
    EXPECT_EQ(r.buffered(), 0u);
  }
}

TEST(RequestReader, ParamsDoneBeforeTheBody) {
  const std::string bytes = full_request(1, "body");
  const size_t body_at = bytes.find(record(4, 1, "")) + 8;
  RequestReader r;
  r.append(bytes.data(), body_at - 1);
  EXPECT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  EXPECT_FALSE(r.params_done());
  r.append(bytes.data() + body_at - 1, 1);
  EXPECT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  EXPECT_TRUE(r.params_done());
}

TEST(RequestReader, NextRequestOnTheSameConnection) {
  const std::string bytes = full_request(1, "one", true) + full_request(2, "two", false);
  RequestReader r;
  r.append(bytes.data(), bytes.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_EQ(r.body(), "one");
  EXPECT_GT(r.buffered(), 0u) << "the second request stays buffered";
  r.next();
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_EQ(r.body(), "two");
  EXPECT_EQ(r.request_id(), 2);
  EXPECT_FALSE(r.keep_conn());
  r.next();
  EXPECT_FALSE(r.started());
}

// envp() is what the server hands fill_request: the params as C strings, then a null. The
// buffer behind it is reused by the connection's next request, which must see its own.
TEST(RequestReader, EnvpHoldsTheParamsOfTheRequestInHand) {
  auto request = [](uint16_t id, const std::string& params) {
    return begin(id, true) + record(4, id, params) + record(4, id, "") + record(5, id, "");
  };
  const std::string nul_value("a\0b", 3);
  const std::string bytes =
      request(1, pair("REQUEST_METHOD", "GET") + pair("HTTP_X_NUL", nul_value) +
                     pair("QUERY_STRING", std::string(500, 'q'))) +
      request(2, pair("REQUEST_URI", "/second"));
  RequestReader r;
  r.append(bytes.data(), bytes.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  ASSERT_EQ(r.params().size(), 3u);
  EXPECT_EQ(r.params()[1], "HTTP_X_NUL=" + nul_value) << "params keep every byte";
  char* const* envp = r.envp();
  EXPECT_STREQ(envp[0], "REQUEST_METHOD=GET");
  EXPECT_STREQ(envp[1], "HTTP_X_NUL=a") << "a C string ends at the NUL, as CGI's environment";
  EXPECT_EQ(std::string(envp[2]), "QUERY_STRING=" + std::string(500, 'q'));
  EXPECT_EQ(envp[3], nullptr);
  r.next();
  EXPECT_EQ(r.envp()[0], nullptr) << "next() forgets the params";
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  ASSERT_EQ(r.params().size(), 1u);
  EXPECT_EQ(r.params()[0], "REQUEST_URI=/second");
  EXPECT_STREQ(r.envp()[0], "REQUEST_URI=/second");
  EXPECT_EQ(r.envp()[1], nullptr);
  r.release_parked();
  EXPECT_TRUE(r.params().empty());
  EXPECT_EQ(r.envp()[0], nullptr);
}

TEST(RequestReader, RecordReadyOnlyForAWholeRecord) {
  const std::string bytes = full_request(1, "one") + full_request(2, "two");
  RequestReader r;
  r.append(bytes.data(), bytes.size() - 1);
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  r.next();
  EXPECT_TRUE(r.record_ready()) << "the second request's records wait in the buffer";
  ASSERT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  EXPECT_FALSE(r.record_ready()) << "only the cut last record is left: it needs the peer";
  EXPECT_GT(r.buffered(), 0u);
  RequestReader three_bytes;
  three_bytes.append("\x01\x01\x00", 3);
  EXPECT_EQ(three_bytes.advance(), RequestReader::Status::kNeedMore);
  EXPECT_FALSE(three_bytes.record_ready());
  EXPECT_TRUE(three_bytes.started());
}

TEST(RequestReader, AnsweredBeforeItsBodyEndedTheRestIsSkipped) {
  // The 408 path: the params are in, the body is still coming when kagi answers.
  const std::string bytes = full_request(1, "slow body that never ends in time");
  const size_t body_at = bytes.find(record(4, 1, "")) + 8;
  RequestReader r;
  r.append(bytes.data(), body_at + 12);  // params and a cut STDIN record
  ASSERT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  ASSERT_TRUE(r.params_done());
  r.next();
  // The rest of that body arrives, then the web server's next request on the connection.
  const std::string rest = bytes.substr(body_at + 12) + full_request(1, "next");
  r.append(rest.data(), rest.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_EQ(r.body(), "next");
  EXPECT_EQ(r.params().size(), 3u);
  EXPECT_TRUE(r.replies().empty());
}

TEST(RequestReader, BodyOverTheLimitIsDroppedAndFlagged) {
  RequestReader r(ReaderLimits{.max_params_bytes = 4096, .max_body_bytes = 10});
  const std::string bytes = full_request(1, std::string(11, 'x'));
  r.append(bytes.data(), bytes.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_TRUE(r.body_too_large());
  EXPECT_TRUE(r.body().empty());
  r.next();
  const std::string fits = full_request(2, std::string(10, 'x'));
  r.append(fits.data(), fits.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_FALSE(r.body_too_large()) << "the flag belongs to one request";
  EXPECT_EQ(r.body().size(), 10u);
}

TEST(RequestReader, ParamsOverTheLimitAreFlagged) {
  RequestReader r(ReaderLimits{.max_params_bytes = 100, .max_body_bytes = 100});
  const std::string bytes = full_request(1, "");
  r.append(bytes.data(), bytes.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_TRUE(r.params_too_large());
  EXPECT_TRUE(r.params().empty());
}

TEST(RequestReader, GarbageIsAnError) {
  struct Case {
    const char* what;
    std::string bytes;
  };
  std::string cut_pair = std::string(1, '\x05') + std::string(1, '\x05') + "ab";
  const Case cases[] = {
      {"version 2", std::string("\x02\x01\x00\x01\x00\x08\x00\x00", 8) + std::string(8, '\0')},
      {"an HTTP request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"stdin before the end of params", begin(1, true) + record(5, 1, "x")},
      {"a name-value pair cut short", begin(1, true) + record(4, 1, cut_pair) + record(4, 1, "")},
      {"a short begin record", record(1, 1, "\x00\x01")},
  };
  for (const auto& c : cases) {
    RequestReader r;
    r.append(c.bytes.data(), c.bytes.size());
    EXPECT_EQ(r.advance(), RequestReader::Status::kError) << c.what;
    EXPECT_FALSE(r.error().empty()) << c.what;
    EXPECT_EQ(r.advance(), RequestReader::Status::kError) << c.what << ": for good";
  }
}

TEST(RequestReader, AnswersManagementRecords) {
  RequestReader r;
  const std::string q =
      record(9, 0, pair("FCGI_MPXS_CONNS", "") + pair("FCGI_NO_SUCH", "")) + record(42, 0, "");
  r.append(q.data(), q.size());
  EXPECT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  auto replies = parse_records(r.replies());
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].type, 10);  // FCGI_GET_VALUES_RESULT
  EXPECT_EQ(replies[0].content, pair("FCGI_MPXS_CONNS", "0")) << "unknown names are left out";
  EXPECT_EQ(replies[1].type, 11);  // FCGI_UNKNOWN_TYPE
  EXPECT_EQ(static_cast<uint8_t>(replies[1].content[0]), 42);
  EXPECT_FALSE(r.started()) << "management records begin no request";
}

TEST(RequestReader, RefusesASecondRequestAndUnknownRoles) {
  RequestReader r;
  const std::string bytes = begin(1, true) + begin(2, true) + begin(3, true, 2);
  r.append(bytes.data(), bytes.size());
  EXPECT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  auto replies = parse_records(r.replies());
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].type, 3);
  EXPECT_EQ(replies[0].id, 2);
  EXPECT_EQ(static_cast<uint8_t>(replies[0].content[4]), 1) << "FCGI_CANT_MPX_CONN";
  EXPECT_EQ(replies[1].id, 3);
  EXPECT_EQ(static_cast<uint8_t>(replies[1].content[4]), 1)
      << "a begin while one request is open is a second request, whatever its role";
  EXPECT_EQ(r.request_id(), 1);

  RequestReader other;
  const std::string filter = begin(7, true, 3);
  other.append(filter.data(), filter.size());
  other.advance();
  replies = parse_records(other.replies());
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(static_cast<uint8_t>(replies[0].content[4]), 3) << "FCGI_UNKNOWN_ROLE";
}

TEST(RequestReader, AbortWhileReadingEndsTheRequest) {
  RequestReader r;
  const std::string bytes = begin(1, true) + record(4, 1, pair("A", "b")) + record(2, 1, "");
  r.append(bytes.data(), bytes.size());
  EXPECT_EQ(r.advance(), RequestReader::Status::kNeedMore);
  auto replies = parse_records(r.replies());
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].type, 3) << "FCGI_END_REQUEST";
  EXPECT_FALSE(r.started()) << "ready for the next request";
  r.replies().clear();
  const std::string again = full_request(2, "x");
  r.append(again.data(), again.size());
  EXPECT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_FALSE(r.aborted());
}

TEST(RequestReader, AbortOfACompleteRequestIsSeen) {
  RequestReader r;
  const std::string bytes = full_request(1, "x");
  r.append(bytes.data(), bytes.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_FALSE(r.aborted());
  const std::string other_id = record(2, 9, "");
  r.append(other_id.data(), other_id.size());
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_FALSE(r.aborted()) << "an abort of another request is not ours";
  const std::string abort = record(2, 1, "");
  r.append(abort.data(), 5);
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_FALSE(r.aborted()) << "half a record is no abort yet";
  r.append(abort.data() + 5, abort.size() - 5);
  ASSERT_EQ(r.advance(), RequestReader::Status::kComplete);
  EXPECT_TRUE(r.aborted());
  EXPECT_TRUE(r.replies().empty()) << "the response to a parked request ends it";
}

TEST(EncodeResponse, StdoutRecordsThenEndRequest) {
  const std::string head = "Status: 200 OK\r\n\r\n";
  const std::string body(70000, 'b');
  auto records = parse_records(encode_response(7, head, body));
  std::string stdout_bytes;
  size_t empty_stdout = 0;
  for (size_t i = 0; i + 1 < records.size(); ++i) {
    EXPECT_EQ(records[i].type, 6);
    EXPECT_EQ(records[i].id, 7);
    if (records[i].content.empty()) ++empty_stdout;
    stdout_bytes += records[i].content;
  }
  EXPECT_EQ(stdout_bytes, head + body);
  EXPECT_EQ(empty_stdout, 1u) << "one empty FCGI_STDOUT ends the stream";
  EXPECT_TRUE(records[records.size() - 2].content.empty());
  EXPECT_EQ(records.back().type, 3);
  EXPECT_EQ(records.back().content, std::string(8, '\0')) << "app status 0, request complete";
}

TEST(FcgiEncode, NameValuePairsUseOneOrFourByteLengths) {
  std::string out;
  append_name_value(out, "A", std::string(127, 'v'));
  append_name_value(out, std::string(128, 'n'), "");
  append_name_value(out, "BIG", std::string(70000, 'x'));
  EXPECT_EQ(out, pair("A", std::string(127, 'v')) + pair(std::string(128, 'n'), "") +
                     pair("BIG", std::string(70000, 'x')));
}

}  // namespace
}  // namespace kagi::fcgi
