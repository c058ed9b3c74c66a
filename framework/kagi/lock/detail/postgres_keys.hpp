// lock/detail/postgres_keys.hpp — lock name → PostgreSQL advisory lock key.
//
// The key is the first 8 bytes of SHA-256 of the name, big-endian, as a signed 64-bit
// integer: the same on every host and build, spread over the whole key space, and not
// steerable by whoever picks names (a chat room, say) without a 2^32 birthday search. Two
// names on one key would only make them exclude each other (more locking, never less); the
// kagi_lock_names table turns such a collision into a refusal (docs/LOCKING.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace kagi::lock {

int64_t postgres_key(std::string_view name);

}  // namespace kagi::lock
