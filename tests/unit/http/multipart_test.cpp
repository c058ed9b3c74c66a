// multipart_boundary and parse_multipart (framework/kagi/http/multipart.cpp).
#include <kagi/http/form.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace kagi::http {
namespace {

using namespace std::string_literals;
using Items = std::vector<Params::Item>;

constexpr std::string_view kB = "XyZ";

// A well-formed CRLF body from (Content-Disposition params, data) pairs.
std::string body_of(const std::vector<std::pair<std::string, std::string>>& parts) {
  std::string body;
  for (const auto& [disposition, data] : parts) {
    body += "--XyZ\r\nContent-Disposition: form-data; " + disposition + "\r\n\r\n" + data + "\r\n";
  }
  return body + "--XyZ--\r\n";
}

ParseError parse(std::string_view body, Form& out, const FormLimits& limits = {}) {
  return parse_multipart(body, kB, limits, out);
}

Form parse_ok(std::string_view body, const FormLimits& limits = {}) {
  Form out;
  EXPECT_EQ(parse(body, out, limits), ParseError::kNone) << body;
  return out;
}

ParseError parse_error(std::string_view body, const FormLimits& limits = {},
                       std::string_view boundary = kB) {
  Form out;
  out.fields.add("kept", "1");
  const ParseError e = parse_multipart(body, boundary, limits, out);
  // A rejected body leaves what was there before untouched.
  EXPECT_EQ(out.fields.items(), (Items{{"kept", "1"}})) << body;
  EXPECT_TRUE(out.files.empty());
  return e;
}

// --- multipart_boundary ---

TEST(MultipartBoundary, FromBrowserContentTypes) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=----WebKitFormBoundaryAbC123"),
            "----WebKitFormBoundaryAbC123");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"a b'()+_,-./:=?\""),
            "a b'()+_,-./:=?");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data;BOUNDARY=x"), "x");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=\"utf;8\"; boundary=b; x=y"), "b");
  EXPECT_EQ(multipart_boundary("multipart/form-data ; boundary = b ;"), "b");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"q\\\"\""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"\\a\""), "a");
}

TEST(MultipartBoundary, LengthLimits) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=" + std::string(70, 'a')),
            std::string(70, 'a'));
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'a')),
            std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"\""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary="), std::nullopt);
}

TEST(MultipartBoundary, RejectsOtherTypesAndJunk) {
  EXPECT_EQ(multipart_boundary("multipart/mixed; boundary=b"), std::nullopt);
  EXPECT_EQ(multipart_boundary("application/x-www-form-urlencoded"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data"), std::nullopt);
  EXPECT_EQ(multipart_boundary(""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"unterminated"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"ends in space \""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=a<b"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=a; boundary=b"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"a\r\nb\""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; =b"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data boundary=b"), std::nullopt);
}

// --- parse_multipart: normal bodies ---

TEST(Multipart, FieldsAndFilesAsBrowsersSendThem) {
  const std::string body =
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"subject\"\r\n"
      "\r\n"
      "Hello\r\n"
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"upload\"; filename=\"a.txt\"\r\n"
      "Content-Type: text/csv\r\n"
      "\r\n"
      "x,y\r\n1,2\r\n"
      "\r\n"
      "--XyZ\r\n"
      "content-disposition: FORM-DATA; NAME=body\r\n"
      "\r\n"
      "line 1\r\nline 2\r\n"
      "--XyZ--\r\n";
  const Form form = parse_ok(body);
  EXPECT_EQ(form.fields.items(), (Items{{"subject", "Hello"}, {"body", "line 1\r\nline 2"}}));
  ASSERT_EQ(form.files.size(), 1u);
  EXPECT_EQ(form.files[0].field, "upload");
  EXPECT_EQ(form.files[0].filename, "a.txt");
  EXPECT_EQ(form.files[0].content_type, "text/csv");
  EXPECT_EQ(form.files[0].data, "x,y\r\n1,2\r\n");
}

TEST(Multipart, PreambleAndEpilogueAreIgnored) {
  const std::string body = "This is a preamble.\r\n--XyZ-- not yet\r\n" +
                           body_of({{"name=a", "1"}}) + "epilogue\r\n--XyZ\r\njunk";
  EXPECT_EQ(parse_ok(body).fields.items(), (Items{{"a", "1"}}));
}

TEST(Multipart, EmptyFormHasOnlyTheCloseDelimiter) {
  EXPECT_TRUE(parse_ok("--XyZ--\r\n").fields.empty());
  EXPECT_TRUE(parse_ok("--XyZ--").fields.empty());
}

TEST(Multipart, MissingFinalCrlfAfterCloseIsFine) {
  EXPECT_EQ(parse_ok("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ--")
                .fields.items(),
            (Items{{"a", "v"}}));
  EXPECT_EQ(parse_ok("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ--  ")
                .fields.items(),
            (Items{{"a", "v"}}));
}

TEST(Multipart, TransportPaddingAfterBoundary) {
  EXPECT_EQ(parse_ok("--XyZ \t\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ-- \r\n")
                .fields.items(),
            (Items{{"a", "v"}}));
}

TEST(Multipart, ZeroLengthValuesAndFiles) {
  const Form form = parse_ok(body_of({{"name=empty", ""}, {"name=f; filename=\"\"", ""}}));
  EXPECT_EQ(form.fields.items(), (Items{{"empty", ""}}));
  ASSERT_EQ(form.files.size(), 1u);
  EXPECT_EQ(form.files[0].filename, "");
  EXPECT_EQ(form.files[0].data, "");
  EXPECT_EQ(form.files[0].content_type, "text/plain");  // RFC 7578 default
}

TEST(Multipart, PartWithHeadersAndNoBodyIsEmpty) {
  EXPECT_EQ(
      parse_ok("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n--XyZ--\r\n").fields.items(),
      (Items{{"a", ""}}));
}

TEST(Multipart, DataKeepsCrlfAndBinaryBytes) {
  const std::string data = "\r\n\0\xff\r\n--\r\n"s;
  EXPECT_EQ(parse_ok(body_of({{"name=bin", data}})).fields.items(), (Items{{"bin", data}}));
}

TEST(Multipart, BoundaryLookalikesInsideDataAreData) {
  // Only a whole "--XyZ" line ends a part; these lines merely start like one.
  const std::string data = "a\r\n--XyZX\r\n--XyZ-x\r\n--XyZ--x\r\n--XyZ \tz\r\nXyZ\r\n-XyZ\n--XyZ";
  EXPECT_EQ(parse_ok(body_of({{"name=a", data}})).fields.items(), (Items{{"a", data}}));
}

TEST(Multipart, QuotedNamesWithEscapes) {
  const Form form = parse_ok(body_of({{"name=\"a\\\"b\\\\c;d=e\"", "1"},
                                      {"name=\"\xe6\x97\xa5\xe6\x9c\xac\"", "2"},
                                      {"name=\"x\"; filename=\"C:\\\\dir\\\\q\\\"t.txt\"", "3"}}));
  EXPECT_EQ(form.fields.items(), (Items{{"a\"b\\c;d=e", "1"}, {"\xe6\x97\xa5\xe6\x9c\xac", "2"}}));
  ASSERT_EQ(form.files.size(), 1u);
  EXPECT_EQ(form.files[0].filename, "C:\\dir\\q\"t.txt");
}

TEST(Multipart, PercentEncodedQuotesInNamesAreLeftAlone) {
  // Browsers send '"' in a name as %22; it is not decoded (a literal "%22" looks the same).
  EXPECT_EQ(parse_ok(body_of({{"name=\"a%22b\"", "1"}})).fields.items(), (Items{{"a%22b", "1"}}));
}

TEST(Multipart, UnknownHeadersAndParamsAreIgnored) {
  const Form form = parse_ok(
      "--XyZ\r\nX-Custom: 1\r\nContent-Transfer-Encoding: binary\r\n"
      "Content-Disposition: form-data; foo=bar; name=\"a\"; filename*=UTF-8''x\r\n"
      "\r\nv\r\n--XyZ--\r\n");
  EXPECT_EQ(form.fields.items(), (Items{{"a", "v"}}));
  EXPECT_TRUE(form.files.empty());
}

TEST(Multipart, BareLfBodies) {
  const Form form = parse_ok(
      "--XyZ\nContent-Disposition: form-data; name=a\n\nline1\r\nline2\n--XyZ\n"
      "Content-Disposition: form-data; name=f; filename=x\nContent-Type: image/png\n\nPNG\n"
      "--XyZ--\n");
  EXPECT_EQ(form.fields.items(), (Items{{"a", "line1\r\nline2"}}));
  ASSERT_EQ(form.files.size(), 1u);
  EXPECT_EQ(form.files[0].content_type, "image/png");
  EXPECT_EQ(form.files[0].data, "PNG");
}

TEST(Multipart, BareLfBodyAlsoSplitsOnCrlfDelimiterLines) {
  // Otherwise the part would hold "\r\n--XyZ\r\n", which a CRLF parser splits on.
  const Form form = parse_ok(
      "--XyZ\nContent-Disposition: form-data; name=a\n\nv\r\n--XyZ\r\n"
      "Content-Disposition: form-data; name=b\n\nw\n--XyZ--\r\n");
  EXPECT_EQ(form.fields.items(), (Items{{"a", "v\r"}, {"b", "w"}}));
}

TEST(Multipart, BareLfBodyRejectsCrlfHeaderLines) {
  EXPECT_EQ(parse_error("--XyZ\nContent-Disposition: form-data; name=a\r\n\r\nv\n--XyZ--\n"),
            ParseError::kMalformed);
}

TEST(Multipart, CrlfBodyDoesNotSplitOnBareLf) {
  // The first delimiter line fixes CRLF; a bare-LF boundary line later on is data.
  const std::string data = "x\n--XyZ\nContent-Disposition: form-data; name=b\n\ny";
  EXPECT_EQ(parse_ok(body_of({{"name=a", data}})).fields.items(), (Items{{"a", data}}));
}

TEST(Multipart, AppendsToExistingForm) {
  Form out;
  out.fields.add("old", "0");
  ASSERT_EQ(parse(body_of({{"name=a", "1"}}), out), ParseError::kNone);
  EXPECT_EQ(out.fields.items(), (Items{{"old", "0"}, {"a", "1"}}));
}

// --- parse_multipart: malformed bodies ---

TEST(Multipart, PartWithoutNameIsMalformed) {
  EXPECT_EQ(parse_error(body_of({{"filename=\"x\"", "1"}})), ParseError::kMalformed);
  EXPECT_EQ(parse_error("--XyZ\r\n\r\nv\r\n--XyZ--\r\n"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("--XyZ\r\nContent-Type: text/plain\r\n\r\nv\r\n--XyZ--\r\n"),
            ParseError::kMalformed);
  // A 0-length part: no headers at all.
  EXPECT_EQ(parse_error("--XyZ\r\n\r\n--XyZ--\r\n"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("--XyZ\r\n--XyZ--\r\n"), ParseError::kMalformed);
}

TEST(Multipart, MissingOrWrongBoundaryIsMalformed) {
  EXPECT_EQ(parse_error(""), ParseError::kMalformed);
  EXPECT_EQ(parse_error("name=a&b=c"), ParseError::kMalformed);
  EXPECT_EQ(parse_error(body_of({{"name=a", "1"}}), {}, "Other"), ParseError::kMalformed);
  EXPECT_EQ(parse_error("--XyZX\r\n"), ParseError::kMalformed);
}

TEST(Multipart, InvalidBoundaryArgumentIsMalformed) {
  EXPECT_EQ(parse_error("----\r\n", {}, ""), ParseError::kMalformed);
  EXPECT_EQ(parse_error("--a\r\n", {}, std::string(71, 'a')), ParseError::kMalformed);
  EXPECT_EQ(parse_error("--a\nb\r\n", {}, "a\nb"), ParseError::kMalformed);
}

TEST(Multipart, MissingCloseDelimiterIsMalformed) {
  EXPECT_EQ(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ\r\n"),
            ParseError::kMalformed);
  EXPECT_EQ(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ"),
            ParseError::kMalformed);
  EXPECT_EQ(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ-"),
            ParseError::kMalformed);
}

TEST(Multipart, EveryTruncationOfAValidBodyIsMalformed) {
  const std::string body =
      body_of({{"name=a", "1"}, {"name=\"f\"; filename=\"b.bin\"", "\r\n--\r\n"}});
  ASSERT_EQ(parse_ok(body).fields.size(), 1u);
  // Cutting anywhere before the closing "--XyZ--" leaves no close delimiter.
  const size_t close = body.rfind("--XyZ--");
  for (size_t n = 0; n < close + 7; ++n) {
    EXPECT_EQ(parse_error(body.substr(0, n)), ParseError::kMalformed) << n;
  }
}

TEST(Multipart, BadHeadersAreMalformed) {
  auto with_header = [](const std::string& header) {
    return "--XyZ\r\n" + header + "\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ--";
  };
  EXPECT_EQ(parse_error(with_header("no colon")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header(": no name")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header("Bad Name: x")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header(" folded: x")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header("X-Nul: a\0b"s)), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header("X-Cr: a\rb")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header("X-Lf: a\nb")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header("Content-Type: a\r\nContent-Type: b")), ParseError::kMalformed);
  EXPECT_EQ(parse_error(with_header("Content-Disposition: form-data; name=b")),
            ParseError::kMalformed);
}

TEST(Multipart, BadDispositionsAreMalformed) {
  for (const std::string disposition : {
           "attachment; name=a",
           "form-data name=a",
           "form-data; name",
           "form-data; name=",
           "form-data; name=\"unterminated",
           "form-data; name=\"a\"junk",
           "form-data; name=\"a\"; name=\"b\"",
           "form-data; name=a; filename=x; filename=y",
           "form-data; name=\"a\\",
           "form-data; name=\"nested \"quotes\"\"",
       }) {
    EXPECT_EQ(
        parse_error("--XyZ\r\nContent-Disposition: " + disposition + "\r\n\r\nv\r\n--XyZ--\r\n"),
        ParseError::kMalformed)
        << disposition;
  }
}

TEST(Multipart, CrlfOrNulInNamesIsMalformed) {
  EXPECT_EQ(parse_error(body_of({{"name=\"a\rb\"", "v"}})), ParseError::kMalformed);
  EXPECT_EQ(parse_error(body_of({{"name=\"a\\\rb\"", "v"}})), ParseError::kMalformed);
  EXPECT_EQ(parse_error(body_of({{"name=\"a\0b\""s, "v"}})), ParseError::kMalformed);
  EXPECT_EQ(parse_error(body_of({{"name=\"a\x7f\"", "v"}})), ParseError::kMalformed);
}

TEST(Multipart, HeaderLineLimits) {
  const std::string long_name(8000, 'n');
  EXPECT_EQ(parse_ok(body_of({{"name=" + long_name, "v"}})).fields.items(),
            (Items{{long_name, "v"}}));
  EXPECT_EQ(parse_error(body_of({{"name=" + std::string(9000, 'n'), "v"}})),
            ParseError::kMalformed);
  std::string many;
  for (int i = 0; i < 20; ++i) many += "X-H: 1\r\n";
  EXPECT_EQ(parse_error("--XyZ\r\n" + many + "Content-Disposition: form-data; name=a\r\n\r\n" +
                        "v\r\n--XyZ--"),
            ParseError::kMalformed);
}

TEST(Multipart, HeadersNotEndedByBlankLineAreMalformed) {
  EXPECT_EQ(parse_error("--XyZ\r\nContent-Disposition: form-data; name=a\r\n--XyZ--"),
            ParseError::kMalformed);
}

// --- parse_multipart: limits ---

TEST(Multipart, FieldCountLimitCountsFieldsAndFiles) {
  FormLimits limits;
  limits.max_fields = 2;
  EXPECT_EQ(parse_ok(body_of({{"name=a", "1"}, {"name=f; filename=x", "2"}}), limits).fields.size(),
            1u);
  EXPECT_EQ(
      parse_error(body_of({{"name=a", "1"}, {"name=f; filename=x", "2"}, {"name=b", ""}}), limits),
      ParseError::kTooMany);
}

TEST(Multipart, HugePartCountIsRejected) {
  std::vector<std::pair<std::string, std::string>> parts(5000, {"name=x", ""});
  EXPECT_EQ(parse_error(body_of(parts)), ParseError::kTooMany);  // default limit: 1000
}

TEST(Multipart, FieldAndFileSizeLimits) {
  FormLimits limits;
  limits.max_field_bytes = 4;
  limits.max_file_bytes = 6;
  EXPECT_EQ(parse_ok(body_of({{"name=abcd", "wxyz"}, {"name=f; filename=x", "123456"}}), limits)
                .files.size(),
            1u);
  EXPECT_EQ(parse_error(body_of({{"name=a", "12345"}}), limits), ParseError::kTooLarge);
  EXPECT_EQ(parse_error(body_of({{"name=abcde", "1"}}), limits), ParseError::kTooLarge);
  EXPECT_EQ(parse_error(body_of({{"name=f; filename=x", "1234567"}}), limits),
            ParseError::kTooLarge);
  EXPECT_EQ(parse_error(body_of({{"name=f; filename=abcde", "1"}}), limits), ParseError::kTooLarge);
}

TEST(Multipart, HugeFileIsRejected) {
  const std::string big(2 * 1024 * 1024, 'z');
  EXPECT_EQ(parse_error(body_of({{"name=f; filename=big.bin", big}})), ParseError::kTooLarge);
}

}  // namespace
}  // namespace kagi::http
