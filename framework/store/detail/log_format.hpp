// store/detail/log_format.hpp — the on-disk format of an append-only log.
//
//   file   := magic record*
//   magic  := "KAGILOG1"                          (8 bytes; refuses to treat other files as logs)
//   record := length:u32le crc:u32le payload      crc = CRC-32C over length bytes + payload
//
// A record is valid only if it is complete and its checksum matches; parsing stops at the
// first invalid one, and everything from there on is the torn tail a crash mid-append left.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::store::detail {

inline constexpr std::string_view kLogMagic = "KAGILOG1";
inline constexpr size_t kRecordHeader = 8;
// Records above this are refused (Errc::kTooLarge): a log is for many small records.
inline constexpr size_t kMaxRecord = 16u << 20;

// Appends the framed `payload` to `out`.
void encode_record(std::string& out, std::string_view payload);

enum class Header {
  kValid,    // starts with the magic
  kPartial,  // shorter than the magic and a prefix of it (or empty): a torn creation
  kForeign,  // something else: not a kagi log
};
Header check_header(std::string_view file_start);

// Parses records from `bytes` (which starts at a record boundary). Appends payloads to `out`
// if non-null. Returns how many bytes of `bytes` are valid records; the rest is a torn tail.
size_t parse_records(std::string_view bytes, std::vector<std::string>* out);

}  // namespace kagi::store::detail
