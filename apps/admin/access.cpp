#include "admin/access.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <kagi/app/http_error.hpp>
#include <kagi/http/headers.hpp>
#include <kagi/util/password.hpp>
#include <kagi/util/random.hpp>

namespace kagi::apps::admin {
namespace {

constexpr size_t kMaxAuthorization = 1024;

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The hash an unknown user's password is checked against: one with the scheme, cost and salt
// of the file's first entry, for a password nobody knows. Without entries (or with one
// libxcrypt cannot read), a hash of the default scheme.
std::string make_stand_in(const std::map<std::string, std::string>& users) {
  const std::string password = util::random_hex(16);
  if (!users.empty()) {
    if (auto like = util::hash_password_like(password, users.begin()->second)) return *like;
  }
  return util::hash_password(password).value_or("");
}

}  // namespace

LoginBackoff::LoginBackoff(int free_failures, int64_t max_wait_s, size_t max_addresses)
    : free_failures_(free_failures), max_wait_s_(max_wait_s), max_addresses_(max_addresses) {}

int64_t LoginBackoff::wait_ms(const std::string& address, int64_t now_ms) const {
  util::MutexLock lock(mu_);
  auto it = records_.find(address);
  return it == records_.end() ? 0 : std::max<int64_t>(0, it->second.until_ms - now_ms);
}

void LoginBackoff::failed(const std::string& address, int64_t now_ms) {
  util::MutexLock lock(mu_);
  auto it = records_.find(address);
  if (it == records_.end()) {
    if (records_.size() >= max_addresses_) {
      auto oldest = std::min_element(
          records_.begin(), records_.end(),
          [](const auto& a, const auto& b) { return a.second.until_ms < b.second.until_ms; });
      records_.erase(oldest);
    }
    it = records_.emplace(address, Record{}).first;
  }
  Record& r = it->second;
  ++r.failures;
  // The try after the last free failure waits 1 s; each failure after that doubles it.
  const int over = r.failures - free_failures_;
  if (over >= 0) {
    const int64_t wait_s =
        over >= 30 ? max_wait_s_ : std::min<int64_t>(max_wait_s_, int64_t{1} << over);
    r.until_ms = now_ms + wait_s * 1000;
  }
}

void LoginBackoff::succeeded(const std::string& address) {
  util::MutexLock lock(mu_);
  records_.erase(address);
}

size_t LoginBackoff::size() const {
  util::MutexLock lock(mu_);
  return records_.size();
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = text[i + j];
      if (c == '=') {
        // Padding only at the very end, in the last two positions.
        if (i + 4 != text.size() || j < 2) return std::nullopt;
        ++pad;
        v[j] = 0;
      } else {
        if (pad > 0) return std::nullopt;
        v[j] = base64_value(c);
        if (v[j] < 0) return std::nullopt;
      }
    }
    const uint32_t n = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                       (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

std::optional<BasicCredentials> parse_basic_auth(std::string_view header) {
  if (header.size() > kMaxAuthorization) return std::nullopt;
  size_t space = header.find(' ');
  if (space == std::string_view::npos || !http::iequals(header.substr(0, space), "basic")) {
    return std::nullopt;
  }
  std::string_view encoded = header.substr(space + 1);
  while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
  while (!encoded.empty() && encoded.back() == ' ') encoded.remove_suffix(1);
  if (encoded.empty()) return std::nullopt;
  auto decoded = base64_decode(encoded);
  if (!decoded) return std::nullopt;
  size_t colon = decoded->find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  return BasicCredentials{decoded->substr(0, colon), decoded->substr(colon + 1)};
}

std::string normalize_address(std::string_view address) {
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  constexpr std::string_view kMapped = "::ffff:";
  if (address.size() > kMapped.size() &&
      http::iequals(address.substr(0, kMapped.size()), kMapped) &&
      address.find('.') != std::string_view::npos) {
    address.remove_prefix(kMapped.size());
  }
  return std::string(address);
}

std::map<std::string, std::string> parse_htpasswd(std::string_view text) {
  std::map<std::string, std::string> users;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) continue;
    users.emplace(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
  }
  return users;
}

AdminAccess::AdminAccess(std::string htpasswd_path, std::vector<std::string> allow)
    : path_(std::move(htpasswd_path)) {
  for (const std::string& a : allow) allow_.push_back(normalize_address(a));
}

std::optional<std::string> AdminAccess::hash_for(const std::string& user,
                                                 std::string& stand_in) const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return std::nullopt;
  std::string text;
  bool changed;
  {
    util::MutexLock lock(mu_);
    changed = st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec ||
              st.st_size != size_;
  }
  if (changed) {
    // Read outside the lock; the last reader to finish wins, and all read the same file.
    std::ifstream in(path_, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream ss;
    ss << in.rdbuf();
    auto users = parse_htpasswd(ss.str());
    std::string fresh_stand_in = make_stand_in(users);  // one slow hash, outside the lock
    util::MutexLock lock(mu_);
    users_ = std::move(users);
    stand_in_ = std::move(fresh_stand_in);
    mtime_ = st.st_mtim;
    size_ = st.st_size;
  }
  util::MutexLock lock(mu_);
  stand_in = stand_in_;
  auto it = users_.find(user);
  if (it == users_.end()) return std::nullopt;
  return it->second;
}

Access AdminAccess::check(std::string_view client_address,
                          std::optional<std::string_view> authorization) const {
  if (!enabled()) return Access::kOff;
  const std::string client = normalize_address(client_address);
  bool allowed = false;
  for (const std::string& a : allow_) allowed = allowed || a == client;
  if (!allowed) return Access::kForbidden;
  if (!authorization) return Access::kUnauthorized;  // a browser's first try: not a failure
  // A backing-off address is refused before any hash: guessing costs the guesser time, and
  // the server nothing.
  if (const int64_t wait_ms = backoff_.wait_ms(client, steady_now_ms())) {
    const std::string wait_s = std::to_string((wait_ms + 999) / 1000);  // whole seconds, up
    throw HttpError(429, "Too many failed logins from " + client + ". Please wait " + wait_s +
                             " seconds and try again.")
        .with_header("Retry-After", wait_s);
  }
  auto creds = parse_basic_auth(*authorization);
  bool ok = false;
  if (creds) {
    std::string stand_in;
    auto hash = hash_for(creds->user, stand_in);
    // An unknown user costs the same hash as a known one (see make_stand_in), so the time
    // taken does not tell which user names exist.
    ok = util::verify_password(creds->password, hash ? *hash : stand_in) && hash;
  }
  if (!ok) {
    // Timed after the hash: the wait starts when the answer goes out, however slow the hash.
    backoff_.failed(client, steady_now_ms());
    return Access::kUnauthorized;
  }
  backoff_.succeeded(client);
  return Access::kAllowed;
}

}  // namespace kagi::apps::admin
