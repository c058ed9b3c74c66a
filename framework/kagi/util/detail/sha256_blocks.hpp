// util/detail/sha256_blocks.hpp — SHA-256's compression function (FIPS 180-4, 6.2.2): one
// 64-byte block into the eight-word state, in portable C++ and with the x86 SHA extensions
// (SHA-NI: most x86-64 processors since 2016-2019), which do the same in a tenth of the time.
// util/sha256.cpp picks one once per process; the tests check that both agree.
#pragma once

#include <array>
#include <cstdint>

namespace kagi::util::detail {

using Sha256State = std::array<uint32_t, 8>;

void sha256_block_portable(Sha256State& h, const unsigned char* block);

// Whether this processor has the SHA extensions (and the SSSE3 and SSE4.1 they come with).
// Always false off x86-64.
bool sha256_extensions_available();

// The same as sha256_block_portable; call only where sha256_extensions_available().
void sha256_block_with_extensions(Sha256State& h, const unsigned char* block);

}  // namespace kagi::util::detail
