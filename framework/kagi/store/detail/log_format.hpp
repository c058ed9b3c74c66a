// store/detail/log_format.hpp — the on-disk format of an append-only log.
//
//   file   := magic record*
//   magic  := "KAGILOG1"                          (8 bytes; refuses to treat other files as logs)
//   record := length:u32le crc:u32le payload      crc = CRC-32C over length bytes + payload
//
// A record is intact only if it is complete and its checksum matches. Invalid bytes are of two
// kinds, told apart by what follows them:
//   - a torn tail: no intact record follows (a crash mid-append leaves exactly that); it is
//     dropped, and the next append overwrites it;
//   - a damaged span: an intact record follows (a flipped bit, a bad sector, a stray write in
//     the middle of the log). Parsing resynchronises on the next intact record (the first
//     offset where a whole record with a matching checksum starts) and keeps everything after
//     it: one bad byte must not take every later record with it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/store/log_cursor.hpp>

namespace kagi::store::detail {

inline constexpr std::string_view kLogMagic = "KAGILOG1";
inline constexpr size_t kRecordHeader = 8;
using store::kMaxRecord;  // store/log_cursor.hpp

// Appends the framed `payload` to `out`.
void encode_record(std::string& out, std::string_view payload);

enum class Header {
  kValid,    // starts with the magic
  kPartial,  // shorter than the magic and a prefix of it (or empty): a torn creation
  kForeign,  // something else: not a kagi log
};
Header check_header(std::string_view file_start);

// A span of `bytes` that holds no intact record but is followed by one (offsets relative to
// the `bytes` given to parse_records).
struct Damage {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Parses records from `bytes` (which starts at a record boundary). Appends the payloads of the
// intact records to `out` and the damaged spans between them to `damage` (each if non-null).
// Returns the end of the last intact record: the rest of `bytes` is a torn tail.
//
// The search for the next intact record checks every offset; a candidate whose length field is
// above kMaxRecord or past the end costs one comparison, so the usual damage (text payloads)
// is skipped at memory speed.
size_t parse_records(std::string_view bytes, std::vector<std::string>* out,
                     std::vector<Damage>* damage = nullptr);

// The size (header + payload) of the intact record starting at `pos` of `bytes`, or 0 if none
// starts there.
size_t intact_record_at(std::string_view bytes, size_t pos);

}  // namespace kagi::store::detail
