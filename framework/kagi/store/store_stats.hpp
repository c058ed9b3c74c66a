// store/store_stats.hpp — what one process's data folder did to make records durable: the
// group commit's rounds, how they flushed, and what the journal replayed at start. The admin
// page, /admin/locks.json and /metrics show these summed over a host's processes
// (stats/host_stats.hpp), so an operator can see that group commit shares its flushes
// (requests per round), what a flush costs, and whether the journal carries the rounds.
#pragma once

#include <cstdint>

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

  void add(const StoreStats& o) {
    rounds += o.rounds;
    round_requests += o.round_requests;
    round_flush_us += o.round_flush_us;
    flushes += o.flushes;
    journal_rounds += o.journal_rounds;
    journal_checkpoints += o.journal_checkpoints;
    syncfs_declined += o.syncfs_declined;
    replayed += o.replayed;
  }
  bool operator==(const StoreStats&) const = default;
};

}  // namespace kagi::store
