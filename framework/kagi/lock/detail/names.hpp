// lock/detail/names.hpp — lock names: validation, the name → lock file mapping, stats prefixes.
//
// A lock name is hierarchical, e.g. "bbs/board/3": segments of [a-z0-9_.-] separated by '/',
// no empty segment, no "." or ".." segment, at most kMaxNameBytes bytes. Upper case is refused
// (not folded) so that two names can never meet on a case-insensitive filesystem.
//
// Every valid name maps to one file name with no '/' in it, so no name can escape the lock
// directory. Short names map one-to-one ('/' becomes '@', which no name contains); long names
// map to a readable prefix, '#' and a 64-bit hash. The full name is also stored inside the lock
// file, so the (astronomically unlikely) case of two long names sharing a file is detected and
// refused (Errc::kNameCollision), never silent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace kagi::lock {

inline constexpr size_t kMaxNameBytes = 200;
// Names longer than this are hashed into their file name.
inline constexpr size_t kMaxDirectFileName = 120;

// Empty error_code if `name` is a valid lock name; Errc::kInvalidName otherwise, with a
// human-readable reason in `*why` (if given), e.g. "segment 2 is '..'".
std::error_code validate_name(std::string_view name, std::string* why = nullptr);

// The lock file's name (no directory) for a *valid* name, ending in ".lock".
std::string lock_file_name(std::string_view name);

// The stats prefix of a valid name: the name without its last segment
// ("bbs/board/3" → "bbs/board"); a single-segment name is its own prefix.
std::string_view name_prefix(std::string_view name);

// Stable across processes and builds (FNV-1a, 64 bit). Inline: the lock table and the stats
// hash every name on the acquire path.
inline uint64_t name_hash(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// name_hash as a transparent hasher for unordered containers keyed by names.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return name_hash(name); }
};

}  // namespace kagi::lock
