// Fuzzes the host-wide stats file codec (stats/host_stats.hpp): the files every worker
// writes and the admin page reads, so a torn or hostile file must never crash the reader.
// Invariant: text that decodes re-encodes to a canonical form that decodes to the same
// stats, and encoding that again gives the same bytes (a fixpoint after one round).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/stats/host_stats.hpp>
#include "fuzz_check.hpp"

using kagi::RequestStatsSnapshot;
using kagi::stats::Event;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  kagi::lock::StatsSnapshot stats;
  RequestStatsSnapshot requests;
  std::vector<Event> events;
  kagi::store::StoreStats storage;
  if (!kagi::stats::decode_stats_file(text, stats, requests, events, &storage)) return 0;

  const std::deque<Event> queue(events.begin(), events.end());
  const std::string once = kagi::stats::encode_stats_file(stats, requests, queue, storage);
  kagi::lock::StatsSnapshot stats2;
  RequestStatsSnapshot requests2;
  std::vector<Event> events2;
  kagi::store::StoreStats storage2;
  FUZZ_CHECK(kagi::stats::decode_stats_file(once, stats2, requests2, events2, &storage2));
  FUZZ_CHECK(events2.size() == events.size());
  FUZZ_CHECK(storage2 == storage);
  const std::deque<Event> queue2(events2.begin(), events2.end());
  FUZZ_CHECK(kagi::stats::encode_stats_file(stats2, requests2, queue2, storage2) == once);
  return 0;
}
