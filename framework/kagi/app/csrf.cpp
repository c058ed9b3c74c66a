#include <kagi/app/csrf.hpp>

#include <kagi/util/random.hpp>

namespace kagi::csrf {
namespace {

constexpr size_t kNonceBytes = 16;  // 128 bits: never repeats, never guessed
constexpr size_t kMacBytes = 16;    // 128 bits of HMAC-SHA-256: forging one is out of reach
constexpr std::string_view kDomain = "csrf";

}  // namespace

bool is_unsafe_method(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

bool well_formed(std::string_view token) {
  if (token.size() != 2 * (kNonceBytes + kMacBytes)) return false;
  for (char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Tokens::issue() const {
  std::string nonce = util::random_hex(kNonceBytes);
  return nonce + secret_.tag(kDomain, nonce, kMacBytes);
}

bool Tokens::signed_by_us(std::string_view token) const {
  if (!well_formed(token)) return false;
  const std::string_view nonce = token.substr(0, 2 * kNonceBytes);
  return util::constant_time_equal(token.substr(2 * kNonceBytes),
                                   secret_.tag(kDomain, nonce, kMacBytes));
}

std::string_view Tokens::cookie_token(const http::Request& request, bool secure) const {
  auto token = request.cookies.get(cookie_name(secure));
  return token && signed_by_us(*token) ? *token : std::string_view();
}

bool Tokens::verify(const http::Request& request, bool secure) const {
  return submitted(request, cookie_token(request, secure));
}

bool Tokens::submitted(const http::Request& request, std::string_view expected) const {
  if (expected.empty()) return false;
  std::optional<std::string_view> sent = request.form.fields.get(kField);
  if (!sent) sent = request.headers.get(kHeader);
  return sent && util::constant_time_equal(*sent, expected);
}

}  // namespace kagi::csrf
