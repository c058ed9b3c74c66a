#include <kagi/store/detail/journal_format.hpp>

#include <bit>
#include <cstring>

#include <kagi/store/detail/crc32c.hpp>

namespace kagi::store::detail {

static_assert(std::endian::native == std::endian::little, "the journal is stored little-endian");

namespace {

constexpr std::string_view kMagic = "KAGIJNL1";

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <class T>
T get(std::string_view in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  return value;
}

}  // namespace

std::string encode_journal_header(uint64_t epoch) {
  std::string out(kMagic);
  put<uint64_t>(out, epoch);
  put<uint32_t>(out, crc32c(0, out));
  put<uint32_t>(out, 0);
  return out;
}

void encode_journal_entry(std::string& out, uint64_t epoch, const JournalEntry& e) {
  const size_t start = out.size();
  put<uint32_t>(out, 0);  // the checksum, set below
  put<uint32_t>(out, static_cast<uint32_t>(journal_entry_size(e)));
  put<uint64_t>(out, epoch);
  put<uint64_t>(out, static_cast<uint64_t>(e.dev));
  put<uint64_t>(out, static_cast<uint64_t>(e.ino));
  put<int64_t>(out, e.birth_ns);
  put<uint64_t>(out, e.offset);
  put<uint32_t>(out, static_cast<uint32_t>(e.path.size()));
  put<uint32_t>(out, 0);
  out.append(e.path);
  out.append(e.bytes);
  const uint32_t crc = crc32c(0, std::string_view(out).substr(start + 4));
  std::memcpy(out.data() + start, &crc, sizeof crc);
}

std::optional<JournalContents> decode_journal(std::string_view file) {
  if (file.size() < kJournalHeaderSize || file.substr(0, 8) != kMagic) return std::nullopt;
  if (get<uint32_t>(file, 16) != crc32c(0, file.substr(0, 16))) return std::nullopt;
  JournalContents out;
  out.epoch = get<uint64_t>(file, 8);
  size_t at = kJournalHeaderSize;
  while (file.size() - at >= kJournalEntryHeaderSize) {
    const uint32_t size = get<uint32_t>(file, at + 4);
    if (size < kJournalEntryHeaderSize || size > file.size() - at) break;
    if (get<uint32_t>(file, at) != crc32c(0, file.substr(at + 4, size - 4))) break;
    if (get<uint64_t>(file, at + 8) != out.epoch) break;
    const uint32_t path_size = get<uint32_t>(file, at + 48);
    if (path_size > size - kJournalEntryHeaderSize) break;
    // Where the bytes go must be a file offset (an off_t): nothing a writer could have meant.
    if (get<uint64_t>(file, at + 40) > kMaxJournalOffset) break;
    JournalEntry e;
    e.dev = static_cast<dev_t>(get<uint64_t>(file, at + 16));
    e.ino = static_cast<ino_t>(get<uint64_t>(file, at + 24));
    e.birth_ns = get<int64_t>(file, at + 32);
    e.offset = get<uint64_t>(file, at + 40);
    const size_t body = at + kJournalEntryHeaderSize;
    e.path = file.substr(body, path_size);
    e.bytes = file.substr(body + path_size, size - kJournalEntryHeaderSize - path_size);
    out.entries.push_back(std::move(e));
    at += size;
  }
  out.used = at;
  return out;
}

}  // namespace kagi::store::detail
