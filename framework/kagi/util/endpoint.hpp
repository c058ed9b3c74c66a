// util/endpoint.hpp — socket addresses as people write them: "127.0.0.1:1006",
// "[::1]:1006", "localhost:1006" or "unix:/run/kagi-lockd/lockd.sock" (kagi-lockd's listen
// addresses and the lockd lock backend's locks.lockd.address).
//
//   util::Endpoint ep;
//   std::string why;
//   if (!util::parse_endpoint("unix:/run/kagi-lockd/lockd.sock", ep, &why)) fail(why);
//   int fd = ::socket(ep.family(), SOCK_STREAM, 0);
//   ::connect(fd, ep.sockaddr_ptr(), ep.sockaddr_len());
//
// Hosts are numeric IPv4 or IPv6 addresses, or "localhost" (127.0.0.1): no name lookup, so
// parsing never waits on DNS.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <netinet/in.h>

#include <string>
#include <string_view>

namespace kagi::util {

struct Endpoint {
  bool is_unix = false;
  std::string path;  // unix
  sockaddr_storage addr{};
  socklen_t addr_len = 0;

  int family() const { return addr.ss_family; }
  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&addr); }
  socklen_t sockaddr_len() const { return addr_len; }
};

// False, with what is wrong in `why`, if `text` is not one of the forms above (a port must
// be 0..65535; a unix path must fit sockaddr_un).
bool parse_endpoint(std::string_view text, Endpoint& out, std::string* why);

// "127.0.0.1:5000", "[::1]:5000" or "unix:/path" for a socket address (and a unix socket
// address with no path: "unix").
std::string endpoint_text(const sockaddr* addr, socklen_t len);

// The address part alone ("127.0.0.1", "::1"; "unix" for a unix socket).
std::string endpoint_host(const sockaddr* addr, socklen_t len);

// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
bool is_loopback(const sockaddr* addr);

}  // namespace kagi::util
