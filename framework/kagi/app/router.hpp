// app/router.hpp — maps method + path to a handler.
//
// Patterns are literal segments and `{name}` placeholders matching one non-empty segment:
// "/bbs/{board}/" matches "/bbs/general/" with param("board") == "general". A trailing slash
// is significant. HEAD is served by GET routes. A path that matches with another method gives
// kMethodNotAllowed and the allowed methods (→ 405 with Allow).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/app/context.hpp>
#include <kagi/http/params.hpp>

namespace kagi {

using Handler = std::function<http::Response(http::Request&, Context&)>;

class Router {
 public:
  void add(std::string method, std::string pattern, Handler handler);
  void get(std::string pattern, Handler handler) {
    add("GET", std::move(pattern), std::move(handler));
  }
  void post(std::string pattern, Handler handler) {
    add("POST", std::move(pattern), std::move(handler));
  }

  struct Match {
    enum Kind { kFound, kNotFound, kMethodNotAllowed } kind = kNotFound;
    const Handler* handler = nullptr;    // kFound
    const std::string* route = nullptr;  // kFound: "GET /bbs/{board}/" (method + pattern)
    http::Params params;                 // kFound: the {placeholders}
    std::string allow;                   // kMethodNotAllowed: "GET, HEAD, POST"
  };
  Match match(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{x}" for a placeholder
    std::string key;                    // "GET /bbs/{board}/"
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace kagi
