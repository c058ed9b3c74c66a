#include "chat/parking.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

namespace kagi::apps::chat {
namespace {

using Clock = ParkingLot::Clock;
using namespace std::chrono_literals;

// What a fake parked request received.
struct Probe {
  std::vector<std::string> answers;
  bool gone = false;
};

ParkingLot::Waiter waiter(std::shared_ptr<Probe> probe, std::string room, int64_t since,
                          Clock::time_point deadline) {
  return {.room = std::move(room),
          .since = since,
          .deadline = deadline,
          .complete =
              [probe](std::string body) {
                probe->answers.push_back(std::move(body));
                return probe->answers.size() == 1;
              },
          .gone = [probe] { return probe->gone; }};
}

const Clock::time_point kFar = Clock::now() + 1h;

TEST(ParkingLot, DeliversNewMessagesOnlyToItsRoomAndOnlyOnce) {
  ParkingLot lot;
  auto a = std::make_shared<Probe>(), b = std::make_shared<Probe>(), c = std::make_shared<Probe>();
  lot.park(waiter(a, "lobby", 2, kFar));
  lot.park(waiter(b, "lobby", 3, kFar));
  lot.park(waiter(c, "other", 2, kFar));
  std::vector<Message> ms{{.id = 2, .name = "x", .text = "old"}, {.id = 3, .text = "n3"}};

  EXPECT_EQ(lot.deliver("lobby", ms, 3), 1u);  // b is up to date with 3
  ASSERT_EQ(a->answers.size(), 1u);
  EXPECT_EQ(a->answers[0], messages_json(std::vector<Message>{ms[1]}, 3));
  EXPECT_TRUE(b->answers.empty());
  EXPECT_TRUE(c->answers.empty());

  ms.push_back({.id = 4, .text = "n4"});
  EXPECT_EQ(lot.deliver("lobby", ms, 4), 1u);
  EXPECT_EQ(a->answers.size(), 1u);  // a left the lot with its first answer
  ASSERT_EQ(b->answers.size(), 1u);
  EXPECT_EQ(b->answers[0], messages_json(std::vector<Message>{ms[2]}, 4));
  EXPECT_EQ(lot.stats().parked, 1u);  // c
  EXPECT_TRUE(lot.has_waiters("other"));
  EXPECT_FALSE(lot.has_waiters("lobby"));
}

TEST(ParkingLot, ExpiresAtTheDeadlineWithNoMessages) {
  ParkingLot lot;
  auto early = std::make_shared<Probe>(), late = std::make_shared<Probe>();
  const auto t0 = Clock::now();
  EXPECT_TRUE(lot.park(waiter(late, "lobby", 5, t0 + 10s)).earliest);
  EXPECT_TRUE(lot.park(waiter(early, "lobby", 5, t0 + 1s)).earliest);  // earliest: wake the timer
  EXPECT_FALSE(lot.park(waiter(std::make_shared<Probe>(), "lobby", 5, t0 + 5s)).earliest);
  EXPECT_EQ(lot.next_deadline(), t0 + 1s);

  EXPECT_EQ(lot.expire(t0), 0u);
  EXPECT_EQ(lot.expire(t0 + 1s), 1u);
  ASSERT_EQ(early->answers.size(), 1u);
  EXPECT_EQ(early->answers[0], R"({"messages":[],"last":5})");
  EXPECT_TRUE(late->answers.empty());
  EXPECT_EQ(lot.next_deadline(), t0 + 5s);
  EXPECT_EQ(lot.expire(t0 + 20s), 2u);
  EXPECT_FALSE(lot.next_deadline());
  EXPECT_EQ(lot.stats().expired, 3u);
}

TEST(ParkingLot, FreesWaitersWhoseClientIsGone) {
  ParkingLot lot;
  std::vector<std::shared_ptr<Probe>> probes;
  for (int i = 0; i < 10000; ++i) {
    probes.push_back(std::make_shared<Probe>());
    lot.park(waiter(probes.back(), "lobby", 0, kFar));
  }
  for (int i = 0; i < 10000; i += 2) probes[static_cast<size_t>(i)]->gone = true;
  EXPECT_EQ(lot.sweep_gone(), 5000u);
  EXPECT_EQ(lot.stats().parked, 5000u);
  for (auto& p : probes) p->gone = true;
  EXPECT_EQ(lot.sweep_gone(), 5000u);
  auto s = lot.stats();
  EXPECT_EQ(s.parked, 0u);
  EXPECT_EQ(s.gone, 10000u);
  EXPECT_EQ(s.total, 10000u);
  EXPECT_FALSE(lot.next_deadline());
  EXPECT_TRUE(lot.rooms_with_waiters().empty());
  // The lot holds nothing of them any more: only our vector owns the probes.
  for (auto& p : probes) EXPECT_EQ(p.use_count(), 1);
}

TEST(ParkingLot, CloseAllAnswersEveryone) {
  ParkingLot lot;
  auto a = std::make_shared<Probe>(), b = std::make_shared<Probe>();
  lot.park(waiter(a, "x", 1, kFar));
  lot.park(waiter(b, "y", 2, kFar));
  EXPECT_EQ(lot.close_all(), 2u);
  EXPECT_EQ(a->answers, std::vector<std::string>{R"({"messages":[],"last":1})"});
  EXPECT_EQ(b->answers, std::vector<std::string>{R"({"messages":[],"last":2})"});
}

// Racing deliveries and expiry from several threads: each waiter is answered exactly once.
TEST(ParkingLot, EachWaiterLeavesExactlyOnceUnderRaces) {
  ParkingLot lot;
  constexpr int kWaiters = 2000;
  std::vector<std::shared_ptr<std::atomic<int>>> counts;
  for (int i = 0; i < kWaiters; ++i) {
    auto n = std::make_shared<std::atomic<int>>(0);
    counts.push_back(n);
    lot.park({.room = "r",
              .since = 0,
              .deadline = i % 2 ? Clock::now() : kFar,
              .complete = [n](std::string) { return n->fetch_add(1) == 0; },
              .gone = [] { return false; }});
  }
  std::vector<Message> ms{{.id = 1}};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        if (t % 2) {
          lot.deliver("r", ms, 1);
        } else {
          lot.expire(Clock::now());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  lot.deliver("r", ms, 1);
  for (auto& n : counts) EXPECT_EQ(n->load(), 1);
  EXPECT_EQ(lot.stats().parked, 0u);
}

// --- caps: max_waiters in all, max_waiters_per_client per client ----------------------------

ParkingLot::Waiter client_waiter(std::shared_ptr<Probe> probe, std::string client,
                                 Clock::time_point deadline = kFar) {
  ParkingLot::Waiter w = waiter(std::move(probe), "lobby", 0, deadline);
  w.client = std::move(client);
  return w;
}

using Admission = ParkingLot::Admission;

TEST(ParkingLotCaps, RefusesAClientBeyondItsCapAndNobodyElse) {
  ParkingLot lot({.max_waiters = 100, .max_waiters_per_client = 3});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "10.0.0.1")).admission,
              Admission::kParked);
  }
  auto refused = std::make_shared<Probe>();
  EXPECT_EQ(lot.park(client_waiter(refused, "10.0.0.1")).admission, Admission::kClientFull);
  // Another client still gets in.
  EXPECT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "10.0.0.2")).admission,
            Admission::kParked);
  EXPECT_EQ(lot.waiters_of("10.0.0.1"), 3u);
  EXPECT_EQ(lot.waiters_of("10.0.0.2"), 1u);
  auto s = lot.stats();
  EXPECT_EQ(s.parked, 4u);
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.clients, 2u);
  EXPECT_EQ(s.total, 4u);  // the refused one never counted as parked
  // A refused waiter is dropped whole: never answered by the lot (the caller answers it),
  // and not kept (only our pointer owns its probe).
  lot.close_all();
  EXPECT_TRUE(refused->answers.empty());
  EXPECT_EQ(refused.use_count(), 1);
}

TEST(ParkingLotCaps, RefusesEveryoneWhenTheLotIsFull) {
  ParkingLot lot({.max_waiters = 4, .max_waiters_per_client = 3});
  lot.park(client_waiter(std::make_shared<Probe>(), "a"));
  lot.park(client_waiter(std::make_shared<Probe>(), "a"));
  lot.park(client_waiter(std::make_shared<Probe>(), "b"));
  lot.park(client_waiter(std::make_shared<Probe>(), "c"));
  EXPECT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "d")).admission, Admission::kLotFull);
  EXPECT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "a")).admission, Admission::kLotFull);
  EXPECT_EQ(lot.stats().parked, 4u);
  EXPECT_EQ(lot.waiters_of("d"), 0u);
}

TEST(ParkingLotCaps, ZeroMeansNoCap) {
  ParkingLot lot;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "a")).admission,
              Admission::kParked);
  }
  EXPECT_EQ(lot.waiters_of("a"), 1000u);
}

// Whichever way a waiter leaves (delivered, expired, gone, closed), its client's count goes
// down by exactly one: the client can park again up to its cap, never beyond.
TEST(ParkingLotCaps, EveryWayOutReleasesTheClientsPlaceExactlyOnce) {
  constexpr size_t kCap = 2;
  ParkingLot lot({.max_waiters = 100, .max_waiters_per_client = kCap});
  const auto t0 = Clock::now();
  struct Way {
    const char* name;
    std::function<size_t(ParkingLot&, Probe&)> leave;
    Clock::time_point deadline;
  };
  const std::vector<Message> news{{.id = 1, .text = "news"}};
  const std::vector<Way> ways{
      {"deliver", [&](ParkingLot& l, Probe&) { return l.deliver("lobby", news, 1); }, kFar},
      {"expire", [&](ParkingLot& l, Probe&) { return l.expire(t0 + 2s); }, t0 + 1s},
      {"gone",
       [](ParkingLot& l, Probe& p) {
         p.gone = true;
         return l.sweep_gone();
       },
       kFar},
      {"close_all", [](ParkingLot& l, Probe&) { return l.close_all(); }, kFar},
  };
  for (const Way& way : ways) {
    SCOPED_TRACE(way.name);
    // Fill the client's places, then free one this way.
    auto leaving = std::make_shared<Probe>();
    auto staying = std::make_shared<Probe>();
    ASSERT_EQ(lot.park(client_waiter(leaving, "ann", way.deadline)).admission, Admission::kParked);
    ASSERT_EQ(lot.park(client_waiter(staying, "ann")).admission, Admission::kParked);
    ASSERT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "ann")).admission,
              Admission::kClientFull);
    // close_all and deliver take both; the others only the one that leaves.
    const size_t left = way.leave(lot, *leaving);
    EXPECT_GE(left, 1u);
    EXPECT_EQ(leaving->answers.size(), 1u);
    EXPECT_EQ(lot.waiters_of("ann"), kCap - left);
    // Leaving again (the same call once more) releases nothing more.
    way.leave(lot, *leaving);
    EXPECT_EQ(lot.waiters_of("ann"), kCap - left);
    // The freed places can be taken again, and no more than them.
    for (size_t i = 0; i < left; ++i) {
      EXPECT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "ann")).admission,
                Admission::kParked);
    }
    EXPECT_EQ(lot.park(client_waiter(std::make_shared<Probe>(), "ann")).admission,
              Admission::kClientFull);
    lot.close_all();
    EXPECT_EQ(lot.waiters_of("ann"), 0u);
    EXPECT_EQ(lot.stats().clients, 0u);
  }
}

// Many clients parking, and leaving by every way at once from several threads: at the end no
// client holds a place, and the caps held throughout.
TEST(ParkingLotCaps, CountsStayExactUnderRaces) {
  constexpr size_t kPerClient = 4;
  ParkingLot lot({.max_waiters = 64, .max_waiters_per_client = kPerClient});
  std::atomic<bool> over_cap{false};
  std::atomic<uint64_t> parked{0}, answered{0};
  std::vector<std::thread> threads;
  const std::vector<Message> news{{.id = 1}};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 2000; ++k) {
        const std::string client = "c" + std::to_string(k % 7);
        ParkingLot::Waiter w{.room = "r",
                             .client = client,
                             .since = 0,
                             .deadline = k % 3 ? kFar : Clock::now(),
                             .complete =
                                 [&](std::string) {
                                   ++answered;
                                   return true;
                                 },
                             .gone = [k] { return k % 5 == 0; }};
        if (lot.park(std::move(w)).admission == Admission::kParked) ++parked;
        if (lot.waiters_of(client) > kPerClient) over_cap = true;
        if (lot.stats().parked > 64) over_cap = true;
        switch ((k + t) % 4) {
          case 0:
            lot.deliver("r", news, 1);
            break;
          case 1:
            lot.expire(Clock::now());
            break;
          case 2:
            lot.sweep_gone();
            break;
          default:
            break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  lot.close_all();
  EXPECT_FALSE(over_cap.load());
  EXPECT_EQ(answered.load(), parked.load());  // each parked waiter answered exactly once
  EXPECT_EQ(lot.stats().parked, 0u);
  EXPECT_EQ(lot.stats().clients, 0u);
  for (int c = 0; c < 7; ++c) EXPECT_EQ(lot.waiters_of("c" + std::to_string(c)), 0u);
}

}  // namespace
}  // namespace kagi::apps::chat
