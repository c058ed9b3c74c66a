// Fuzzes the FastCGI translation (fcgi/cgi_params.hpp). The input is a list of CGI params
// separated by NUL bytes, as libfcgi hands them over. fill_request never crashes, the
// headers it makes come only from params that name a header, and CONTENT_LENGTH parses only
// when it is all digits. Then a response whose headers and cookie carry the request's bytes
// must produce a head that cannot be split: every line ends in CRLF, no bare CR or LF, and
// the head ends with exactly one empty line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/fcgi/cgi_params.hpp>
#include "fuzz_check.hpp"

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

void check_head(const std::string& head) {
  FUZZ_CHECK(head.size() >= 4 && head.compare(head.size() - 4, 4, "\r\n\r\n") == 0);
  // Exactly one empty line, at the end.
  FUZZ_CHECK(head.find("\r\n\r\n") == head.size() - 4);
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\r') FUZZ_CHECK(i + 1 < head.size() && head[i + 1] == '\n');
    if (head[i] == '\n') FUZZ_CHECK(i > 0 && head[i - 1] == '\r');
  }
  FUZZ_CHECK(head.rfind("Status: ", 0) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  const int status = 100 + data[0] % 500;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::vector<std::string> entries;
  for (size_t start = 0; start <= input.size() && entries.size() < 64;) {
    size_t end = input.find('\0', start);
    if (end == std::string_view::npos) end = input.size();
    entries.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);

  kagi::http::Request request;
  kagi::fcgi::fill_request(envp.data(), request);

  // A header exists only if some param names it.
  for (const auto& [name, value] : request.headers.items()) {
    bool named = false;
    for (const auto& e : entries) {
      const std::string_view param = std::string_view(e).substr(0, e.find('='));
      if (kagi::fcgi::header_name(param) == name) named = true;
    }
    FUZZ_CHECK(named);
  }
  const auto length = kagi::fcgi::content_length(request);
  if (length) FUZZ_CHECK(all_digits(request.headers.get("Content-Length").value_or("")));

  // The response carries attacker bytes in header names, values and a cookie.
  kagi::http::Response response;
  response.status = status;
  for (const auto& [name, value] : request.headers.items()) response.headers.add(name, value);
  response.headers.add(request.method.empty() ? "X" : request.method, request.target);
  response.cookies.push_back({.name = "c", .value = request.target});
  response.body = request.client_address;
  check_head(kagi::fcgi::response_head(response));
  return 0;
}
