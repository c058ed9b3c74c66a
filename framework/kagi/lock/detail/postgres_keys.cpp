#include <kagi/lock/detail/postgres_keys.hpp>

#include <kagi/util/sha256.hpp>

namespace kagi::lock {

int64_t postgres_key(std::string_view name) {
  const util::Digest digest = util::sha256(name);
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | digest[i];
  return static_cast<int64_t>(key);
}

}  // namespace kagi::lock
