// Fuzzes group commit's journal decoder (store/detail/journal_format.hpp) two ways, chosen by
// the first byte:
//
//   even: the rest is a journal file as found on disk, any bytes at all. The decoder must not
//         crash or read out of bounds, and what it returns must be exactly what it read:
//         encoding the header and the entries it found again gives the first `used` bytes.
//   odd:  the input chooses up to 16 entries (byte: path length % 16, byte: data length % 64,
//         then the path and data bytes; dev, ino, birth and offset from the next bytes), which
//         are encoded after a header, and then a damage: truncation at a chosen byte, or bits
//         flipped at a chosen byte. The decoder must return a prefix of the entries, every
//         entry before the damaged byte, unchanged, and none that the damage reached.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/store/detail/journal_format.hpp>
#include "../parsers/fuzz_check.hpp"
#include "../parsers/fuzz_reader.hpp"

namespace {

using kagi::store::detail::decode_journal;
using kagi::store::detail::encode_journal_entry;
using kagi::store::detail::encode_journal_header;
using kagi::store::detail::JournalEntry;

bool same(const JournalEntry& a, const JournalEntry& b) {
  return a.dev == b.dev && a.ino == b.ino && a.birth_ns == b.birth_ns && a.path == b.path &&
         a.offset == b.offset && a.bytes == b.bytes;
}

void decode_anything(std::string_view file) {
  const auto got = decode_journal(file);
  if (!got) return;
  FUZZ_CHECK(got->used <= file.size());
  std::string again = encode_journal_header(got->epoch);
  for (const JournalEntry& e : got->entries) encode_journal_entry(again, got->epoch, e);
  FUZZ_CHECK(again == file.substr(0, got->used));
}

void damage_a_journal(FuzzReader& r) {
  const uint64_t epoch = r.byte() + 1;
  std::vector<JournalEntry> entries;
  std::vector<size_t> ends;  // where each entry ends in the file
  std::string file = encode_journal_header(epoch);
  const size_t count = r.byte() % 17;
  for (size_t i = 0; i < count; ++i) {
    JournalEntry e;
    const size_t path_size = r.byte() % 16, data_size = r.byte() % 64;
    e.path = std::string(r.take(path_size));
    e.bytes = std::string(r.take(data_size));
    e.dev = r.byte();
    e.ino = r.byte();
    e.birth_ns = r.byte();
    e.offset = r.byte();
    encode_journal_entry(file, epoch, e);
    entries.push_back(std::move(e));
    ends.push_back(file.size());
  }
  const bool flip = r.byte() % 2 == 1;
  const size_t at = file.empty() ? 0 : (size_t{r.byte()} << 8 | r.byte()) % file.size();
  const uint8_t mask = static_cast<uint8_t>(r.byte() | 1);  // flips at least one bit
  if (flip) {
    file[at] = static_cast<char>(file[at] ^ mask);
  } else {
    file.resize(at);
  }
  (void)r.rest();

  const auto got = decode_journal(file);
  if (at < kagi::store::detail::kJournalHeaderSize) {
    // The header itself: a changed magic or checksum leaves nothing to replay; a flip in the
    // pad bytes changes nothing.
    if (got) FUZZ_CHECK(got->entries.size() <= entries.size());
    return;
  }
  FUZZ_CHECK(got.has_value());
  // Every entry that ends before the damaged byte comes back, and nothing the damage reached.
  size_t whole = 0;
  while (whole < ends.size() && ends[whole] <= at) ++whole;
  FUZZ_CHECK(got->entries.size() == whole);
  for (size_t i = 0; i < whole; ++i) FUZZ_CHECK(same(got->entries[i], entries[i]));
  FUZZ_CHECK(got->used == (whole == 0 ? kagi::store::detail::kJournalHeaderSize : ends[whole - 1]));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzReader r{std::string_view(reinterpret_cast<const char*>(data), size)};
  if (r.byte() % 2 == 0) {
    decode_anything(r.rest());
  } else {
    damage_a_journal(r);
  }
  return 0;
}
