// store/numbered_log.hpp — items with increasing ids (posts, chat messages) kept in one
// append-only log of the DataStore (a file under data.dir, or rows in PostgreSQL), with bounded
// retention, and a per-process decoded copy of each log kept current as the log grows.
//
// Adding an item appends one record: no rewrite per item, and a crash mid-append leaves a
// torn tail the log drops. Damage in the middle of the log (a flipped bit) loses only the
// items it hit: the store skips it and returns every record after it, so the highest id read
// is still the highest id stored and the next item is numbered above it. (Limit: if the damage
// hits the high-water record of a compacted log whose newest item was deleted, that deleted
// item's id can be given again.) When the log holds more than kCompactAtKeepTimes × `keep`
// records it is rewritten atomically with the newest `keep` items, behind a first record
// holding the highest id ever given, so ids are never reused (a client reading "since id N"
// never misses or repeats one).
//
// Reading goes through a NumberedLogCache: it remembers the items it decoded and where it
// stopped in the log (LogCursor), so a read decodes only the records appended since
// (by any process; on PostgreSQL, one small indexed query). A replaced log (a compaction or a
// delete, by any process) is read again from the start.
//
// Item needs `int64_t id` and `std::string encode(const Item&)` (found by argument-dependent
// lookup); readers pass the record decoder.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kagi/lock/guard.hpp>
#include <kagi/store/data_store.hpp>
#include <kagi/store/record_fields.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::store {

// A log as read under a guard. `items` points into the cache: it is valid while the guard it
// was read under is held (the cached copy changes only when the file does, and nobody can
// change the file while we hold its lock). Copy what you keep past the guard.
template <typename Item>
struct NumberedLog {
  std::span<const Item> items;  // oldest first; at most `keep`
  int64_t last_id = 0;          // highest id ever given
  size_t records = 0;           // records in the log (decides when to compact)
  // Names what `items` and `last_id` hold: a read that finds them changed gets a new number,
  // never used before in this process, and an unchanged log keeps its number. Keys what is
  // made from the items (view::PageCache: a rendered board page).
  uint64_t version = 0;
  std::shared_ptr<const void> owner;  // keeps `items` alive
};

// A compaction costs a new file, a rename and every process's full read of the new log, so it
// waits for several times `keep` records: at 4 × keep, one compaction per 3 × keep appends.
// (At twice keep, a chat room of 200 spent about 8% of a say's time compacting.)
inline constexpr size_t kCompactAtKeepTimes = 4;

namespace detail {
inline constexpr std::string_view kHighWaterTag = "meta1";
// Every NumberedLogCache of the process draws its versions here, so no two states share one.
inline std::atomic<uint64_t> next_log_version{1};
inline uint64_t new_log_version() {
  return next_log_version.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

template <typename Item>
class NumberedLogCache {
 public:
  using Decode = std::optional<Item> (*)(std::string_view);

  NumberedLogCache(size_t keep, Decode decode)
      : keep_(std::max<size_t>(keep, 1)), decode_(decode) {}
  NumberedLogCache(const NumberedLogCache&) = delete;
  NumberedLogCache& operator=(const NumberedLogCache&) = delete;

  size_t keep() const { return keep_; }

  // Reads the log at `path` under `guard` (shared or exclusive). Throws store::StoreError on
  // I/O errors.
  NumberedLog<Item> read(const DataStore& data, const lock::Guard& guard, std::string_view path) {
    std::shared_ptr<Entry> entry = entry_for(path, guard.name());
    if (!entry) {
      // An unusual caller (another lock than this file's usual one, or a flood of paths):
      // a private copy, read in full, that nobody else touches.
      entry = std::make_shared<Entry>();
      entry->lock = guard.name();
    }
    util::MutexLock lock(entry->mu);
    LogCursor cursor = entry->cursor;
    LogTail tail = data.read_log_since(guard, path, cursor).value();
    try {
      apply(*entry, tail);
    } catch (...) {
      // Half applied (out of memory while decoding): start over at the next read rather
      // than apply the same records twice. Only new records are applied, so nobody holds
      // a view of this entry now (see NumberedLog).
      entry->items.clear();
      entry->last_id = 0;
      entry->records = 0;
      entry->cursor = LogCursor{};
      entry->version = detail::new_log_version();
      throw;
    }
    entry->cursor = cursor;
    if (tail.restarted || !tail.records.empty()) entry->version = detail::new_log_version();
    NumberedLog<Item> log;
    const size_t shown = std::min(entry->items.size(), keep_);
    log.items = std::span<const Item>(entry->items).last(shown);
    log.last_id = entry->last_id;
    log.records = entry->records;
    log.version = entry->version;
    log.owner = entry;
    return log;
  }

 private:
  struct Entry {
    util::Mutex mu;
    std::string lock;  // the lock this path is read under; set before the entry is shared
    LogCursor cursor KAGI_GUARDED_BY(mu);
    // Oldest first. Up to 2 × keep, trimmed to keep when full, so that dropping the oldest
    // item is not a shift of the whole vector per append; readers see the newest `keep`.
    std::vector<Item> items KAGI_GUARDED_BY(mu);
    int64_t last_id KAGI_GUARDED_BY(mu) = 0;
    size_t records KAGI_GUARDED_BY(mu) = 0;
    uint64_t version KAGI_GUARDED_BY(mu) = detail::new_log_version();
  };
  static constexpr size_t kMaxEntries = 1024;

  std::shared_ptr<Entry> entry_for(std::string_view path, const std::string& lock_name)
      KAGI_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    auto it = entries_.find(std::string(path));
    if (it == entries_.end()) {
      if (entries_.size() >= kMaxEntries) return nullptr;
      auto entry = std::make_shared<Entry>();
      entry->lock = lock_name;
      it = entries_.emplace(std::string(path), std::move(entry)).first;
    }
    // The cached copy is shared only between holders of the file's one lock.
    if (it->second->lock != lock_name) return nullptr;
    return it->second;
  }

  void apply(Entry& e, const LogTail& tail) const KAGI_REQUIRES(e.mu) {
    if (tail.restarted) {
      e.items.clear();
      e.last_id = 0;
      e.records = 0;
      decode_newest(e, tail.records);
      return;
    }
    e.records += tail.records.size();
    for (const std::string& record : tail.records) {
      if (record.starts_with(detail::kHighWaterTag)) {
        note_high_water(e, record);
      } else if (auto item = decode_(record)) {
        e.last_id = std::max(e.last_id, item->id);
        e.items.push_back(std::move(*item));
      }
    }
    if (e.items.size() >= 2 * keep_) {
      e.items.erase(e.items.begin(), e.items.end() - static_cast<std::ptrdiff_t>(keep_));
    }
  }

  // A whole log: ids grow in log order, so only the newest `keep` items need decoding.
  void decode_newest(Entry& e, const std::vector<std::string>& records) const KAGI_REQUIRES(e.mu) {
    e.records = records.size();
    std::vector<Item> newest_first;
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      if (it->starts_with(detail::kHighWaterTag)) {
        note_high_water(e, *it);
      } else if (newest_first.size() < keep_) {
        if (auto item = decode_(*it)) {
          e.last_id = std::max(e.last_id, item->id);
          newest_first.push_back(std::move(*item));
        }
      }
    }
    e.items.assign(std::make_move_iterator(newest_first.rbegin()),
                   std::make_move_iterator(newest_first.rend()));
  }

  static void note_high_water(Entry& e, std::string_view record) KAGI_REQUIRES(e.mu) {
    if (auto fields = split_fields(record, 2)) {
      e.last_id = std::max(e.last_id, parse_int((*fields)[1]).value_or(0));
    }
  }

  const size_t keep_;
  const Decode decode_;
  util::Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_ KAGI_GUARDED_BY(mu_);
};

// Rewrites the log with `items`, keeping `last_id` (after a delete, or to compact).
template <typename Item>
void replace_numbered(DataStore& data, const lock::ExclusiveGuard& guard, std::string_view path,
                      std::span<const Item> items, int64_t last_id) {
  std::vector<std::string> records;
  records.reserve(items.size() + 1);
  records.push_back(join_fields({detail::kHighWaterTag, std::to_string(last_id)}));
  for (const auto& item : items) records.push_back(encode(item));
  data.rewrite_log(guard, path, records).check();
}

// Adds `item` (its id must be log.last_id + 1), compacting as described above. `log` was
// read under `guard`.
template <typename Item>
void add_numbered(DataStore& data, const lock::ExclusiveGuard& guard, std::string_view path,
                  const NumberedLog<Item>& log, const Item& item, size_t keep) {
  if (log.records + 1 <= kCompactAtKeepTimes * keep) {
    data.append(guard, path, encode(item)).check();
    return;
  }
  const size_t old = std::min(log.items.size(), keep - 1);
  std::vector<Item> items(log.items.end() - static_cast<std::ptrdiff_t>(old), log.items.end());
  items.push_back(item);
  replace_numbered(data, guard, path, std::span<const Item>(items), item.id);
}

}  // namespace kagi::store
