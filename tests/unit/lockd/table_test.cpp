// lockd/table.hpp: FIFO grants in both modes, tokens, memory that follows the locks in use,
// the seed's LRU double grant made impossible, and a random history checked at every step.
#include <kagi/lockd/table.hpp>

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kagi::lockd {
namespace {

using Claim = KeyTable::Claim;

// Records the grants announced to it, in order.
struct Recorder : KeyTable::Owner {
  std::vector<Claim*> granted;
  void on_granted(Claim& c) override { granted.push_back(&c); }
};

const Clock::time_point kNow{};

TEST(KeyTable, ExclusiveThenWaitersInArrivalOrder) {
  KeyTable t(100);
  Recorder r;
  Claim* a = t.request("k", Mode::kExclusive, r, kNow);
  ASSERT_TRUE(a->granted);
  EXPECT_EQ(a->token, 100u);
  Claim* b = t.request("k", Mode::kExclusive, r, kNow);
  Claim* c = t.request("k", Mode::kShared, r, kNow);
  Claim* d = t.request("k", Mode::kShared, r, kNow);
  EXPECT_FALSE(b->granted);
  EXPECT_EQ(t.waiters(), 3u);
  t.release(a, kNow);
  EXPECT_TRUE(r.granted.empty());  // announced by run_ready, never from inside release
  t.run_ready();
  ASSERT_EQ(r.granted, std::vector<Claim*>{b});
  EXPECT_FALSE(c->granted);
  t.release(b, kNow);
  t.run_ready();
  EXPECT_EQ(r.granted, (std::vector<Claim*>{b, c, d}));  // both readers at once
  EXPECT_GT(c->token, b->token);
  EXPECT_GT(d->token, c->token);
  t.release(c, kNow);
  t.release(d, kNow);
  EXPECT_EQ(t.keys(), 0u);
  EXPECT_EQ(t.holders(), 0u);
}

TEST(KeyTable, AWaitingWriterIsNotOvertakenByLaterReaders) {
  KeyTable t(1);
  Recorder r;
  Claim* reader = t.request("k", Mode::kShared, r, kNow);
  Claim* writer = t.request("k", Mode::kExclusive, r, kNow);
  Claim* late = t.request("k", Mode::kShared, r, kNow);
  EXPECT_TRUE(reader->granted);
  EXPECT_FALSE(writer->granted);
  EXPECT_FALSE(late->granted);  // shared beside a shared holder, but a writer waits first
  t.release(reader, kNow);
  t.run_ready();
  EXPECT_EQ(r.granted, std::vector<Claim*>{writer});
  // The writer gives up instead: the reader behind it goes in.
  t.release(writer, kNow);
  t.run_ready();
  EXPECT_TRUE(late->granted);
  t.release(late, kNow);
}

TEST(KeyTable, AWithdrawnHeadWaiterLetsTheNextOnesIn) {
  KeyTable t(1);
  Recorder r;
  Claim* reader = t.request("k", Mode::kShared, r, kNow);
  Claim* writer = t.request("k", Mode::kExclusive, r, kNow);
  Claim* r2 = t.request("k", Mode::kShared, r, kNow);
  t.release(writer, kNow);  // timed out
  t.run_ready();
  EXPECT_EQ(r.granted, std::vector<Claim*>{r2});
  t.release(reader, kNow);
  t.release(r2, kNow);
  EXPECT_EQ(t.keys(), 0u);
}

TEST(KeyTable, AGrantReleasedBeforeItWasAnnouncedIsNeverAnnounced) {
  KeyTable t(1);
  Recorder r;
  Claim* a = t.request("k", Mode::kExclusive, r, kNow);
  Claim* b = t.request("k", Mode::kExclusive, r, kNow);
  Claim* c = t.request("k", Mode::kExclusive, r, kNow);
  t.release(a, kNow);  // b is granted, not yet told
  t.release(b, kNow);  // its connection closed meanwhile: c is granted
  t.run_ready();
  EXPECT_EQ(r.granted, std::vector<Claim*>{c});
  t.release(c, kNow);
}

// The seed's LRU map evicts the lock object of a key held longer than 1,000 other keys were
// used, and then hands the key to a second client. Here the held key keeps its state.
TEST(KeyTable, AHeldKeySurvivesAnyNumberOfOtherKeys) {
  KeyTable t(1);
  Recorder r;
  Claim* held = t.request("held", Mode::kExclusive, r, kNow);
  for (int i = 0; i < 10000; ++i) {
    Claim* c = t.request("other/" + std::to_string(i), Mode::kExclusive, r, kNow);
    ASSERT_TRUE(c->granted);
    t.release(c, kNow);
  }
  EXPECT_EQ(t.keys(), 1u);
  Claim* second = t.request("held", Mode::kExclusive, r, kNow);
  EXPECT_FALSE(second->granted);
  t.release(held, kNow);
  t.run_ready();
  EXPECT_TRUE(second->granted);
  t.release(second, kNow);
  EXPECT_EQ(t.keys(), 0u);
}

TEST(KeyTable, StatusListsKeysInByteOrderWithHoldersAndWaiters) {
  KeyTable t(1);
  Recorder r;
  Claim* b = t.request("b", Mode::kShared, r, kNow);
  Claim* a = t.request("a", Mode::kExclusive, r, kNow);
  Claim* w = t.request("a", Mode::kShared, r, kNow);
  std::vector<std::string> seen;
  t.for_each_key([&](const KeyTable::Key& k) {
    seen.push_back(std::string(k.name) + ":" + std::to_string(k.holders.size) + "/" +
                   std::to_string(k.waiters.size));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"a:1/1", "b:1/0"}));
  for (Claim* c : {w, a, b}) t.release(c, kNow);
}

// Random requests and releases on a few keys: after every step, no key has an exclusive holder
// beside another holder, no waiter could have been granted, and tokens only grow.
TEST(KeyTable, ARandomHistoryKeepsEveryInvariant) {
  KeyTable t(1);
  Recorder r;
  std::mt19937 rng(42);
  std::vector<Claim*> live;
  uint64_t last_token = 0;
  for (int step = 0; step < 200000; ++step) {
    if (live.empty() || rng() % 2) {
      const std::string key = "k" + std::to_string(rng() % 4);
      live.push_back(t.request(key, rng() % 3 ? Mode::kShared : Mode::kExclusive, r, kNow));
    } else {
      const size_t i = rng() % live.size();
      t.release(live[i], kNow);
      live[i] = live.back();
      live.pop_back();
      t.run_ready();
    }
    for (Claim* c : live) {
      if (c->granted && c->token > last_token) last_token = c->token;
    }
    EXPECT_EQ(t.last_token(), last_token);
    t.for_each_key([&](const KeyTable::Key& k) {
      size_t exclusive = 0;
      for (const Claim* c = k.holders.head; c; c = c->next)
        exclusive += c->mode == Mode::kExclusive;
      ASSERT_TRUE(exclusive == 0 || k.holders.size == 1) << k.name;
      if (k.waiters.head) {  // the head waiter could not go in
        const bool fits = !k.holders.head || (k.waiters.head->mode == Mode::kShared &&
                                              k.holders.head->mode == Mode::kShared);
        ASSERT_FALSE(fits) << k.name;
      }
    });
  }
  for (Claim* c : live) t.release(c, kNow);
  t.run_ready();
  EXPECT_EQ(t.keys(), 0u);
}

}  // namespace
}  // namespace kagi::lockd
