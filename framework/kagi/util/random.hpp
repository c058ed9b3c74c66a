// util/random.hpp — unpredictable tokens from the kernel's CSPRNG (getrandom(2)), for CSRF
// tokens, request ids and password salts. Each thread fetches 512 bytes at a time and hands
// every byte out once; a child process after fork() never reuses its parent's bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kagi::util {

// `bytes` random bytes as 2*bytes lowercase hex characters.
std::string random_hex(size_t bytes);

// Constant-time comparison: the time taken does not depend on where a and b differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace kagi::util
