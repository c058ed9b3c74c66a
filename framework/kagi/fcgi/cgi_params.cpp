#include <kagi/fcgi/cgi_params.hpp>

#include <charconv>

namespace kagi::fcgi {
namespace {

std::string_view param_name(std::string_view entry) {
  size_t eq = entry.find('=');
  return eq == std::string_view::npos ? entry : entry.substr(0, eq);
}

std::string_view param_value(std::string_view entry) {
  size_t eq = entry.find('=');
  return eq == std::string_view::npos ? std::string_view() : entry.substr(eq + 1);
}

}  // namespace

std::string header_name(std::string_view param) {
  std::string_view words;
  if (param == "CONTENT_TYPE" || param == "CONTENT_LENGTH") {
    words = param;
  } else if (param.rfind("HTTP_", 0) == 0 && param.size() > 5) {
    words = param.substr(5);
    // "Proxy:" from a client would become HTTP_PROXY, which CGI code reads as the outbound
    // proxy setting (httpoxy); no real request header is called Proxy, so it is dropped.
    if (words == "PROXY") return "";
  } else {
    return "";
  }
  std::string name;
  name.reserve(words.size());
  bool word_start = true;
  for (char c : words) {
    if (c == '_') {
      name += '-';
      word_start = true;
    } else if (word_start) {
      name += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
      word_start = false;
    } else {
      name += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
  }
  return name;
}

void fill_request(char* const* envp, http::Request& request) {
  std::string_view script_name, path_info, query_string;
  bool have_uri = false;
  size_t params = 0;
  for (char* const* p = envp; p && *p; ++p) ++params;
  request.headers.reserve(params);  // most params are headers; one allocation for them all
  for (char* const* p = envp; p && *p; ++p) {
    std::string_view entry(*p);
    std::string_view name = param_name(entry);
    std::string_view value = param_value(entry);
    if (name == "REQUEST_METHOD") {
      request.method = value;
    } else if (name == "REQUEST_URI") {
      request.target = value;
      have_uri = true;
    } else if (name == "REMOTE_ADDR") {
      request.client_address = value;
    } else if (name == "HTTPS") {
      request.https = value == "on" || value == "ON" || value == "1";
    } else if (name == "SCRIPT_NAME") {
      script_name = value;
    } else if (name == "PATH_INFO") {
      path_info = value;
    } else if (name == "QUERY_STRING") {
      query_string = value;
    } else if (std::string header = header_name(name); !header.empty()) {
      request.headers.add(std::move(header), std::string(value));
    }
  }
  if (!have_uri) {
    request.target = std::string(script_name) + std::string(path_info);
    if (request.target.empty()) request.target = "/";
    if (!query_string.empty()) request.target += "?" + std::string(query_string);
  }
}

std::optional<uint64_t> content_length(const http::Request& request) {
  auto text = request.headers.get("Content-Length");
  if (!text || text->empty()) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return value;
}

std::string response_head(const http::Response& response) {
  size_t size = 64;  // the status line, a Content-Length and the end
  for (const auto& [name, value] : response.headers.items()) size += name.size() + value.size() + 4;
  size += 192 * response.cookies.size();
  std::string head;
  head.reserve(size);  // built without growing
  head.append("Status: ").append(std::to_string(response.status)).append(" ");
  head.append(http::reason_phrase(response.status)).append("\r\n");
  http::append_fields(head, response);
  const std::optional<std::string_view> length = response.headers.get("Content-Length");
  const bool have_length = length && !http::has_line_break(*length);
  // Without a body (HEAD, 204, 304) the length is left to the app: the web server frames
  // the response itself.
  if (!have_length && !response.body.empty()) {
    head += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  }
  head += "\r\n";
  return head;
}

}  // namespace kagi::fcgi
