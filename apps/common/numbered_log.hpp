// apps/common/numbered_log.hpp — items with increasing ids (posts, chat messages) kept in one
// append-only log under data.dir, with bounded retention.
//
// Adding an item appends one record: no rewrite per item, and a crash mid-append leaves a
// torn tail the log drops. When the log holds more than twice `keep` records it is rewritten
// atomically with the newest `keep` items, behind a first record holding the highest id ever
// given, so ids are never reused (a client reading "since id N" never misses or repeats one).
//
// Item needs `int64_t id` and `std::string encode(const Item&)` (found by argument-dependent
// lookup); readers pass the record decoder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fields.hpp"
#include "lock/guard.hpp"
#include "store/data_dir.hpp"

namespace kagi::apps {

template <typename Item>
struct NumberedLog {
  std::vector<Item> items;  // oldest first; at most `keep`
  int64_t last_id = 0;      // highest id ever given
  size_t records = 0;       // records in the log (decides when to compact)
};

namespace detail {
inline constexpr std::string_view kHighWaterTag = "meta1";
}

// Reads the log under `guard` (shared or exclusive). Throws store::StoreError on I/O errors.
template <typename Item>
NumberedLog<Item> read_numbered(const store::DataDir& data, const lock::Guard& guard,
                                std::string_view path, size_t keep,
                                std::optional<Item> (*decode)(std::string_view)) {
  NumberedLog<Item> log;
  std::vector<std::string> records = data.read_log(guard, path).value();
  log.records = records.size();
  // Ids grow in log order, so only the newest `keep` items need decoding: walk back from the
  // end. High-water records (written first by a rewrite) carry the highest id ever given.
  std::vector<Item> newest_first;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (it->starts_with(detail::kHighWaterTag)) {
      if (auto fields = split_fields(*it, 2)) {
        log.last_id = std::max(log.last_id, parse_int((*fields)[1]).value_or(0));
      }
    } else if (newest_first.size() < keep) {
      if (auto item = decode(*it)) {
        log.last_id = std::max(log.last_id, item->id);
        newest_first.push_back(std::move(*item));
      }
    }
  }
  log.items.assign(std::make_move_iterator(newest_first.rbegin()),
                   std::make_move_iterator(newest_first.rend()));
  return log;
}

// Rewrites the log with `items`, keeping `last_id` (after a delete, or to compact).
template <typename Item>
void replace_numbered(store::DataDir& data, const lock::ExclusiveGuard& guard,
                      std::string_view path, const std::vector<Item>& items, int64_t last_id) {
  std::vector<std::string> records;
  records.reserve(items.size() + 1);
  records.push_back(join_fields({detail::kHighWaterTag, std::to_string(last_id)}));
  for (const auto& item : items) records.push_back(encode(item));
  data.rewrite_log(guard, path, records).check();
}

// Adds `item` (its id must be log.last_id + 1), compacting as described above.
template <typename Item>
void add_numbered(store::DataDir& data, const lock::ExclusiveGuard& guard, std::string_view path,
                  const NumberedLog<Item>& log, const Item& item, size_t keep) {
  if (log.records + 1 <= 2 * keep) {
    data.append(guard, path, encode(item)).check();
    return;
  }
  const size_t old = std::min(log.items.size(), keep - 1);
  std::vector<Item> items(log.items.end() - static_cast<long>(old), log.items.end());
  items.push_back(item);
  replace_numbered(data, guard, path, items, item.id);
}

}  // namespace kagi::apps
