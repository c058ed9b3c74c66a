#include "chat/parking.hpp"

#include <gtest/gtest.h>

#include <atomic>
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
  EXPECT_EQ(a->answers[0], messages_json({ms[1]}, 3));
  EXPECT_TRUE(b->answers.empty());
  EXPECT_TRUE(c->answers.empty());

  ms.push_back({.id = 4, .text = "n4"});
  EXPECT_EQ(lot.deliver("lobby", ms, 4), 1u);
  EXPECT_EQ(a->answers.size(), 1u);  // a left the lot with its first answer
  ASSERT_EQ(b->answers.size(), 1u);
  EXPECT_EQ(b->answers[0], messages_json({ms[2]}, 4));
  EXPECT_EQ(lot.stats().parked, 1u);  // c
  EXPECT_TRUE(lot.has_waiters("other"));
  EXPECT_FALSE(lot.has_waiters("lobby"));
}

TEST(ParkingLot, ExpiresAtTheDeadlineWithNoMessages) {
  ParkingLot lot;
  auto early = std::make_shared<Probe>(), late = std::make_shared<Probe>();
  const auto t0 = Clock::now();
  EXPECT_TRUE(lot.park(waiter(late, "lobby", 5, t0 + 10s)));
  EXPECT_TRUE(lot.park(waiter(early, "lobby", 5, t0 + 1s)));  // earliest: wake the timer
  EXPECT_FALSE(lot.park(waiter(std::make_shared<Probe>(), "lobby", 5, t0 + 5s)));
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

}  // namespace
}  // namespace kagi::apps::chat
