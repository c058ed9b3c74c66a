// util/password.hpp — salted password hashes through the system's crypt(3) (libxcrypt).
//
// New hashes use yescrypt ("$y$", Debian's default for /etc/shadow) with a fresh random salt.
// verify_password() accepts any scheme libxcrypt knows, including the bcrypt entries
// ("$2y$") that `htpasswd -B` writes, so the admin page can use Apache's htpasswd files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kagi::util {

// A salted hash of `password`, or nullopt if the system cannot hash (never for a normal
// install). Slow on purpose (tens of ms): hash on writes, never on page reads.
std::optional<std::string> hash_password(std::string_view password);

// A hash of `password` with the scheme, cost and salt of `model` (an existing hash), or
// nullopt if `model` is not a setting libxcrypt accepts. For a stand-in hash that costs the
// same to verify as `model`.
std::optional<std::string> hash_password_like(std::string_view password, std::string_view model);

// True if `password` matches `hash` (constant-time compare of the recomputed hash). False
// for an empty, malformed or unsupported hash.
bool verify_password(std::string_view password, std::string_view hash);

// How many times verify_password() has run crypt since the process started (relaxed atomic).
// An observable for tests: they prove a path that must stay cheap for strangers (the admin
// allow-list) computed no hash at all.
uint64_t password_verifications();

}  // namespace kagi::util
