#include <kagi/util/password.hpp>

#include <crypt.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include <kagi/util/random.hpp>

namespace kagi::util {
namespace {

// crypt_data is large (~32 KiB); keep it off the stack of worker threads.
std::unique_ptr<crypt_data> new_crypt_data() {
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  return data;
}

std::atomic<uint64_t> verifications{0};

}  // namespace

std::optional<std::string> hash_password(std::string_view password) {
  if (password.find('\0') != std::string_view::npos) return std::nullopt;
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  // nullptr random bytes: libxcrypt reads the kernel's CSPRNG itself. 0: the default cost.
  if (!crypt_gensalt_rn("$y$", 0, nullptr, 0, setting, sizeof setting)) return std::nullopt;
  auto data = new_crypt_data();
  std::string plain(password);
  const char* out = crypt_r(plain.c_str(), setting, data.get());
  if (!out || out[0] == '*') return std::nullopt;
  return std::string(out);
}

std::optional<std::string> hash_password_like(std::string_view password, std::string_view model) {
  if (model.empty() || model[0] != '$' || password.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  auto data = new_crypt_data();
  std::string plain(password), setting(model);
  const char* out = crypt_r(plain.c_str(), setting.c_str(), data.get());
  if (!out || out[0] == '*') return std::nullopt;
  return std::string(out);
}

bool verify_password(std::string_view password, std::string_view hash) {
  if (hash.empty() || hash[0] != '$' || password.find('\0') != std::string_view::npos) {
    return false;
  }
  verifications.fetch_add(1, std::memory_order_relaxed);
  auto data = new_crypt_data();
  std::string plain(password), setting(hash);
  const char* out = crypt_r(plain.c_str(), setting.c_str(), data.get());
  // libxcrypt returns a string starting with '*' for an invalid setting.
  if (!out || out[0] == '*') return false;
  return constant_time_equal(out, hash);
}

uint64_t password_verifications() { return verifications.load(std::memory_order_relaxed); }

}  // namespace kagi::util
