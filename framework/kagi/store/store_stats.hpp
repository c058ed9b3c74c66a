// store/store_stats.hpp — what one process's data folder did to make records durable: the
// group commit's rounds, how they flushed, and what the journal replayed at start. The admin
// page, /admin/locks.json and /metrics show these summed over a host's processes
// (stats/host_stats.hpp), so an operator can see that group commit shares its flushes
// (requests per round), what a flush costs, and whether the journal carries the rounds.
//
// kStoreFields is the one list of the counters: the stats file, the sums, the JSON, the metrics
// and the page all go through it, so a counter added here is carried everywhere.
#pragma once

#include <cstdint>
#include <string_view>

namespace kagi::store {

struct StoreStats {
  uint64_t rounds = 0;               // group commit rounds (each made its records durable at once)
  uint64_t round_requests = 0;       // what those rounds answered: requests, and blocking waits
  uint64_t round_flush_us = 0;       // the time their flushes took, summed (answers not included)
  uint64_t flushes = 0;              // the fsync, syncfs and journal fdatasync calls they made
  uint64_t journal_rounds = 0;       // rounds whose logs went through the journal: one fdatasync
  uint64_t journal_checkpoints = 0;  // syncfs calls that started the journal over
  uint64_t syncfs_declined = 0;      // rounds that flushed each file: too much else was dirty
  uint64_t replayed = 0;             // journal entries this process's start wrote back into logs

  void add(const StoreStats& other);
  bool operator==(const StoreStats&) const = default;
};

// One counter: its name (the JSON key; a name ending in "_us" is a time), its member, and what
// it counts, for people (the metric's help text).
struct StoreField {
  std::string_view key;
  uint64_t StoreStats::*member;
  std::string_view help;
};

inline constexpr StoreField kStoreFields[] = {
    {"rounds", &StoreStats::rounds,
     "Group commit rounds: each made the records of every request waiting for it durable at "
     "once."},
    {"round_requests", &StoreStats::round_requests,
     "Requests (and blocking waits) that group commit rounds answered."},
    {"round_flush_us", &StoreStats::round_flush_us,
     "Time group commit rounds spent in their flush calls."},
    {"flushes", &StoreStats::flushes,
     "Flush calls of group commit rounds: fsync, syncfs, the journal's fdatasync."},
    {"journal_rounds", &StoreStats::journal_rounds,
     "Rounds whose logs went through the journal (one fdatasync for all of them)."},
    {"journal_checkpoints", &StoreStats::journal_checkpoints,
     "syncfs calls that started a full journal over."},
    {"syncfs_declined", &StoreStats::syncfs_declined,
     "Rounds that flushed each file because too much else was dirty for a syncfs."},
    {"replayed", &StoreStats::replayed,
     "Journal entries the workers' starts wrote back into logs a power cut had cut short."},
};

inline void StoreStats::add(const StoreStats& other) {
  for (const StoreField& f : kStoreFields) this->*f.member += other.*f.member;
}

}  // namespace kagi::store
