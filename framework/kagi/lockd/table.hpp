// lockd/table.hpp — kagi-lockd's key table: who holds each key, and who waits for it in
// which order.
//
//   KeyTable table(first_token);
//   KeyTable::Claim* c = table.request("bbs/3", Mode::kExclusive, connection, now);
//   if (c->granted) reply_ok(c->token);      // else it waits in the key's FIFO queue
//   ...
//   table.release(c, now);                   // the next waiters are granted...
//   table.run_ready();                       // ...and told, through Owner::on_granted
//
// Contract:
//  - A key's state exists only while someone holds or waits for it: the last release frees
//    it, so memory follows the locks in use, never the keys ever seen (the seed's LRU map
//    could drop a key that was still held and grant it twice; this table cannot).
//  - FIFO: a request is granted at once only if nobody waits for the key and its mode is
//    compatible with the holders (shared beside shared; exclusive alone). A shared request
//    behind a waiting exclusive one waits, so writers are never starved by readers.
//  - Tokens: every grant takes the next value of one table-wide counter, so the tokens of a
//    key's grants strictly increase. The counter starts at `first_token` (kagi-lockd: the
//    wall clock in microseconds, so a restart continues above its old tokens).
//  - Grants that a release makes are queued and announced by run_ready(), never from inside
//    release(): an owner's callback may release or request again without re-entering the
//    table half-way through a change.
//
// Single-threaded: kagi-lockd runs it on its one event-loop thread, so it has no mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kagi/lockd/protocol.hpp>

namespace kagi::lockd {

using Clock = std::chrono::steady_clock;

class KeyTable {
 public:
  struct Key;
  class Owner;

  // One connection's hold of, or wait for, one key.
  struct Claim {
    Key* key = nullptr;
    Owner* owner = nullptr;
    Mode mode = Mode::kExclusive;
    bool granted = false;
    uint64_t token = 0;       // set when granted
    Clock::time_point since;  // when it was granted, or when its wait began
    // In its key's holders or waiters list.
    Claim* prev = nullptr;
    Claim* next = nullptr;
    // In the table's queue of grants not yet announced.
    Claim* ready_next = nullptr;
    bool ready = false;
  };

  struct ClaimList {
    Claim* head = nullptr;
    Claim* tail = nullptr;
    size_t size = 0;
    void push_back(Claim* c);
    void remove(Claim* c);
  };

  struct Key {
    std::string_view name;  // the table's own copy
    ClaimList holders;      // in grant order
    ClaimList waiters;      // in arrival order
  };

  class Owner {
   public:
    // `claim` (queued by request()) is granted now: its token and since are set.
    virtual void on_granted(Claim& claim) = 0;

   protected:
    ~Owner() = default;
  };

  explicit KeyTable(uint64_t first_token);
  ~KeyTable();
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // Asks for `key` (already validated) in `mode` for `owner`. The claim comes back granted,
  // or queued behind the key's waiters; it belongs to the caller until release().
  Claim* request(std::string_view key, Mode mode, Owner& owner, Clock::time_point now);
  // Gives up a granted claim or withdraws a queued one (the pointer is dead afterwards).
  // Waiters that may go now are granted and queued for run_ready().
  void release(Claim* claim, Clock::time_point now);
  // Tells each owner whose claim a release granted, in grant order, until none is left.
  void run_ready();

  size_t keys() const { return keys_.size(); }
  size_t holders() const { return holders_; }
  size_t waiters() const { return waiters_; }
  uint64_t last_token() const { return next_token_ - 1; }

  // Every key with someone holding or waiting, in byte order of the names.
  void for_each_key(const std::function<void(const Key&)>& visit) const;

 private:
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  static bool compatible(const Key& key, Mode mode);
  void grant(Key& key, Claim* c, Clock::time_point now);
  // Grants the head waiters of `key` while they are compatible with its holders.
  void promote(Key& key, Clock::time_point now);
  Claim* new_claim();
  void free_claim(Claim* c);

  std::unordered_map<std::string, Key, NameHash, std::equal_to<>> keys_;
  uint64_t next_token_;
  size_t holders_ = 0, waiters_ = 0;
  Claim* ready_head_ = nullptr;
  Claim* ready_tail_ = nullptr;
  std::vector<Claim*> spare_;  // freed claims kept for the next requests (bounded)
};

}  // namespace kagi::lockd
