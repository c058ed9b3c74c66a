// store/detail/journal_format.hpp — the on-disk format of group commit's journal
// (store/detail/journal.hpp says how it is used).
//
//   header := "KAGIJNL1" epoch:u64le crc:u32le pad:u32        (24 bytes; crc over magic+epoch)
//   entry  := crc:u32le size:u32le epoch:u64le dev:u64le ino:u64le birth_ns:i64le
//             offset:u64le path_size:u32le pad:u32 path bytes   (crc: CRC-32C over size..the end)
//
// A reader takes the entries of the header's epoch from the start, up to the first that is
// torn, of another epoch or fails its checksum.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::store::detail {

inline constexpr uint64_t kJournalHeaderSize = 24;
inline constexpr uint64_t kJournalEntryHeaderSize = 56;
// The largest offset an entry may name (2^62: past any log, and far from off_t's limit even
// with the entry's bytes added); an entry naming more is damage.
inline constexpr uint64_t kMaxJournalOffset = uint64_t{1} << 62;

// Bytes of one log, to be written back at `offset` if a power cut loses them.
struct JournalEntry {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t birth_ns = 0;
  std::string path;  // below data.dir
  uint64_t offset = 0;
  std::string bytes;
};

// What a journal file holds: its epoch, the entries of that epoch from its start up to the
// first that is torn, of another epoch or fails its checksum, and the bytes they span (header
// included).
struct JournalContents {
  uint64_t epoch = 0;
  std::vector<JournalEntry> entries;
  size_t used = 0;
};
// The bytes `entry` takes in the journal.
inline uint64_t journal_entry_size(const JournalEntry& entry) {
  return kJournalEntryHeaderSize + entry.path.size() + entry.bytes.size();
}

// A header of `epoch`.
std::string encode_journal_header(uint64_t epoch);
// Appends `entry`, of `epoch`, to `out`.
void encode_journal_entry(std::string& out, uint64_t epoch, const JournalEntry& entry);
// What `file` holds; nullopt if it has no intact header (a new file, or one torn at creation).
std::optional<JournalContents> decode_journal(std::string_view file);

}  // namespace kagi::store::detail
