#include <kagi/util/endpoint.hpp>

#include <arpa/inet.h>

#include <charconv>
#include <cstddef>
#include <cstring>

namespace kagi::util {
namespace {

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

}  // namespace

bool parse_endpoint(std::string_view text, Endpoint& out, std::string* why) {
  out = Endpoint();
  if (text.substr(0, 5) == "unix:") {
    const std::string_view path = text.substr(5);
    sockaddr_un un{};
    if (path.empty()) return fail(why, "'" + std::string(text) + "': unix: needs a path");
    if (path.size() >= sizeof un.sun_path) {
      return fail(why, "'" + std::string(text) + "': unix socket path longer than " +
                           std::to_string(sizeof un.sun_path - 1) + " bytes");
    }
    out.is_unix = true;
    out.path = std::string(path);
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, path.data(), path.size());
    std::memcpy(&out.addr, &un, sizeof un);
    out.addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return true;
  }
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("]:");
    if (close == std::string_view::npos) {
      return fail(why, "'" + std::string(text) + "': expected [IPv6]:PORT");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      return fail(why, "'" + std::string(text) + "': expected HOST:PORT, [IPv6]:PORT or unix:PATH");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return fail(why, "'" + std::string(text) + "': the port must be a number 0..65535");
  }
  const std::string h = host == "localhost" ? std::string("127.0.0.1") : std::string(host);
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, h.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(value));
    std::memcpy(&out.addr, &v4, sizeof v4);
    out.addr_len = sizeof v4;
    return true;
  }
  if (inet_pton(AF_INET6, h.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(value));
    std::memcpy(&out.addr, &v6, sizeof v6);
    out.addr_len = sizeof v6;
    return true;
  }
  return fail(why, "'" + std::string(text) +
                       "': the host must be a numeric IPv4 or IPv6 address or localhost");
}

std::string endpoint_host(const sockaddr* addr, socklen_t) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, buf, sizeof buf);
    return buf;
  }
  if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, buf, sizeof buf);
    return buf;
  }
  return "unix";
}

std::string endpoint_text(const sockaddr* addr, socklen_t len) {
  if (addr->sa_family == AF_INET) {
    return endpoint_host(addr, len) + ":" +
           std::to_string(ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    return "[" + endpoint_host(addr, len) +
           "]:" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port));
  }
  const auto* un = reinterpret_cast<const sockaddr_un*>(addr);
  const size_t max =
      len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  const std::string path(un->sun_path, strnlen(un->sun_path, max));
  return path.empty() ? "unix" : "unix:" + path;
}

bool is_loopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace kagi::util
