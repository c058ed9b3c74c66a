// store/detail/crc32c.hpp — CRC-32C (Castagnoli), the checksum of append-log records.
// Chosen over a plain CRC-32 for its better error detection on short records; a software
// table is fast enough next to a write(2) per record.
#pragma once

#include <cstdint>
#include <string_view>

namespace kagi::store::detail {

// Extends `crc` (0 to start) over `data`.
uint32_t crc32c(uint32_t crc, std::string_view data);

}  // namespace kagi::store::detail
