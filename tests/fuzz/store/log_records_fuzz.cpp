// Fuzzes the append-only log decoder (store/detail/log_format.hpp) the way logs get damaged:
// the input chooses up to 32 records, then one damage — bits flipped inside one record, or
// garbage inserted between two — and the decoder must return every intact record.
//
// Input: byte 0 = record count % 33; per record one length byte (% 64) and that many payload
// bytes; then the damage: a mode byte (even: flip bits in record `index`; odd: insert the
// remaining bytes before record `index`), an index byte, and the rest (XOR masks at
// successive offsets of the record for flips, the inserted bytes otherwise).
//
// Invariants, for every input:
//   - no crash, no read out of bounds (ASan), the end and every span within the bytes,
//     spans in order and each followed by an intact record;
//   - the records before the damage come back first, unchanged;
//   - unless an intact frame starts inside the damaged bytes (a payload that embeds a whole
//     framed record: the documented limit of resynchronisation; apps never store NUL bytes,
//     which every frame header holds), the decoder returns exactly the records outside the
//     damage, reports the damage as one span when records follow it, and treats it as the
//     torn tail (no span, end before it) when none do.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/store/detail/log_format.hpp>
#include "../parsers/fuzz_check.hpp"
#include "../parsers/fuzz_reader.hpp"

namespace {

using kagi::store::detail::Damage;
using kagi::store::detail::encode_record;
using kagi::store::detail::intact_record_at;
using kagi::store::detail::parse_records;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzReader r{std::string_view(reinterpret_cast<const char*>(data), size)};
  const size_t count = r.byte() % 33;
  std::vector<std::string> records;
  for (size_t i = 0; i < count; ++i) records.emplace_back(r.take(r.byte() % 64));
  const bool insert = r.byte() % 2 == 1;
  const size_t index = records.empty() ? 0 : r.byte() % (records.size() + (insert ? 1 : 0));
  const std::string_view damage_bytes = r.rest();

  // The log and where each record starts.
  std::string log;
  std::vector<size_t> starts;
  for (const auto& rec : records) {
    starts.push_back(log.size());
    encode_record(log, rec);
  }
  starts.push_back(log.size());

  // [s, e): the damaged bytes in the final log; records before s and from e on are intact.
  size_t s = 0, e = 0;
  std::vector<std::string> before, after;
  if (insert) {
    s = e = starts[index];
    log.insert(s, damage_bytes);
    e = s + damage_bytes.size();
    before.assign(records.begin(), records.begin() + static_cast<std::ptrdiff_t>(index));
    after.assign(records.begin() + static_cast<std::ptrdiff_t>(index), records.end());
  } else if (!records.empty()) {
    s = starts[index];
    e = starts[index + 1];
    bool changed = false;
    for (size_t k = 0; k < damage_bytes.size() && s + k < e; ++k) {
      log[s + k] = static_cast<char>(log[s + k] ^ damage_bytes[k]);
      changed |= damage_bytes[k] != 0;
    }
    before.assign(records.begin(), records.begin() + static_cast<std::ptrdiff_t>(index));
    if (!changed) before.push_back(records[index]);  // no damage after all
    after.assign(records.begin() + static_cast<std::ptrdiff_t>(index) + 1, records.end());
    if (!changed) s = e;
  } else {
    log.append(damage_bytes);  // no records: everything is garbage
    e = log.size();
  }

  std::vector<std::string> out;
  std::vector<Damage> spans;
  const size_t end = parse_records(log, &out, &spans);

  // Bounds and shape, always.
  FUZZ_CHECK(end <= log.size());
  uint64_t last = 0;
  for (const Damage& d : spans) {
    FUZZ_CHECK(d.length > 0);
    FUZZ_CHECK(d.offset >= last);
    FUZZ_CHECK(d.offset + d.length <= end);
    FUZZ_CHECK(intact_record_at(log, d.offset) == 0);
    FUZZ_CHECK(intact_record_at(log, d.offset + d.length) > 0);
    last = d.offset + d.length;
  }
  FUZZ_CHECK(out.size() >= before.size());
  for (size_t i = 0; i < before.size(); ++i) FUZZ_CHECK(out[i] == before[i]);

  // An intact frame inside the damage: the decoder may follow it (documented); no more
  // promises than the above.
  for (size_t q = s; q < e; ++q) {
    if (intact_record_at(log, q) > 0) return 0;
  }
  std::vector<std::string> want = before;
  want.insert(want.end(), after.begin(), after.end());
  FUZZ_CHECK(out == want);
  if (s == e) {
    FUZZ_CHECK(spans.empty());
    FUZZ_CHECK(end == log.size());
  } else if (!after.empty()) {
    FUZZ_CHECK(spans.size() == 1);
    FUZZ_CHECK(spans[0].offset == s && spans[0].length == e - s);
    FUZZ_CHECK(end == log.size());
  } else {
    FUZZ_CHECK(spans.empty());  // the damage is the tail: torn, not a span
    FUZZ_CHECK(end == s);
  }
  return 0;
}
