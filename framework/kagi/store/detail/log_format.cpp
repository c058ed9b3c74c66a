#include <kagi/store/detail/log_format.hpp>

#include <kagi/store/detail/crc32c.hpp>

namespace kagi::store::detail {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

uint32_t get_u32(std::string_view s) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

}  // namespace

void encode_record(std::string& out, std::string_view payload) {
  std::string length;
  put_u32(length, static_cast<uint32_t>(payload.size()));
  out.append(length);
  put_u32(out, crc32c(crc32c(0, length), payload));
  out.append(payload);
}

Header check_header(std::string_view file_start) {
  if (file_start.size() >= kLogMagic.size()) {
    return file_start.substr(0, kLogMagic.size()) == kLogMagic ? Header::kValid : Header::kForeign;
  }
  return kLogMagic.substr(0, file_start.size()) == file_start ? Header::kPartial : Header::kForeign;
}

size_t intact_record_at(std::string_view bytes, size_t pos) {
  if (pos > bytes.size() || bytes.size() - pos < kRecordHeader) return 0;
  std::string_view header = bytes.substr(pos, kRecordHeader);
  const uint32_t length = get_u32(header);
  if (length > kMaxRecord || bytes.size() - pos - kRecordHeader < length) return 0;
  std::string_view payload = bytes.substr(pos + kRecordHeader, length);
  if (crc32c(crc32c(0, header.substr(0, 4)), payload) != get_u32(header.substr(4))) return 0;
  return kRecordHeader + length;
}

size_t parse_records(std::string_view bytes, std::vector<std::string>* out,
                     std::vector<Damage>* damage) {
  size_t pos = 0;  // always just past an intact record (or 0)
  while (bytes.size() - pos >= kRecordHeader) {
    if (const size_t size = intact_record_at(bytes, pos)) {
      if (out) out->emplace_back(bytes.substr(pos + kRecordHeader, size - kRecordHeader));
      pos += size;
      continue;
    }
    // Not a record: damage if an intact record follows, else the torn tail.
    size_t next = pos + 1;
    while (bytes.size() - next >= kRecordHeader && intact_record_at(bytes, next) == 0) ++next;
    if (bytes.size() - next < kRecordHeader) break;
    if (damage) damage->push_back(Damage{pos, next - pos});
    pos = next;
  }
  return pos;
}

}  // namespace kagi::store::detail
