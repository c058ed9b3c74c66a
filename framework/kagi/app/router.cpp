#include <kagi/app/router.hpp>

namespace kagi {
namespace {

std::vector<std::string> split_path(std::string_view path) {
  // "/bbs/{board}/" → ["bbs", "{board}", ""]: the empty last segment keeps the trailing slash
  // significant.
  std::vector<std::string> segments;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    segments.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return segments;
}

bool is_placeholder(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

bool matches(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
             http::Params* params) {
  if (pattern.size() != path.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (is_placeholder(pattern[i])) {
      if (path[i].empty()) return false;
      if (params) params->add(pattern[i].substr(1, pattern[i].size() - 2), path[i]);
    } else if (pattern[i] != path[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

void Router::add(std::string method, std::string pattern, Handler handler) {
  std::string key = method + " " + pattern;
  routes_.push_back(
      Route{std::move(method), split_path(pattern), std::move(key), std::move(handler)});
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  Match result;
  if (path.empty() || path.front() != '/') return result;
  std::vector<std::string> segments = split_path(path);
  std::string_view wanted = method == "HEAD" ? "GET" : method;
  for (const auto& route : routes_) {
    if (route.method != wanted) continue;
    http::Params params;
    if (matches(route.segments, segments, &params)) {
      result.kind = Match::kFound;
      result.handler = &route.handler;
      result.route = &route.key;
      result.params = std::move(params);
      return result;
    }
  }
  // Not found for this method: is the path served by another one?
  for (const auto& route : routes_) {
    if (!matches(route.segments, segments, nullptr)) continue;
    if (result.allow.find(route.method) != std::string::npos) continue;
    if (!result.allow.empty()) result.allow += ", ";
    result.allow += route.method;
    if (route.method == "GET") result.allow += ", HEAD";
  }
  if (!result.allow.empty()) result.kind = Match::kMethodNotAllowed;
  return result;
}

}  // namespace kagi
