#include "app/csrf.hpp"

#include "util/random.hpp"

namespace kagi::csrf {

bool is_unsafe_method(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

bool well_formed(std::string_view token) {
  if (token.size() != 32) return false;
  for (char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string new_token() { return util::random_hex(16); }

std::string_view cookie_token(const http::Request& request) {
  auto token = request.cookies.get(kCookie);
  return token && well_formed(*token) ? *token : std::string_view();
}

bool verify(const http::Request& request) {
  std::string_view expected = cookie_token(request);
  if (expected.empty()) return false;
  std::optional<std::string_view> sent = request.form.fields.get(kField);
  if (!sent) sent = request.headers.get(kHeader);
  return sent && util::constant_time_equal(*sent, expected);
}

}  // namespace kagi::csrf
