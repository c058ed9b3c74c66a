// store/detail/crc32c.hpp — CRC-32C (Castagnoli), the checksum of append-log records.
// Chosen over a plain CRC-32 for its better error detection on short records, and because
// x86-64 computes it in hardware (SSE 4.2, used when the CPU has it): reading a log checks
// every record, so the checksum is on the read path of every board page and post.
#pragma once

#include <cstdint>
#include <string_view>

namespace kagi::store::detail {

// Extends `crc` (0 to start) over `data`.
uint32_t crc32c(uint32_t crc, std::string_view data);

// The same with the byte-wise table only (what crc32c() uses without SSE 4.2); for tests.
uint32_t crc32c_portable(uint32_t crc, std::string_view data);

}  // namespace kagi::store::detail
