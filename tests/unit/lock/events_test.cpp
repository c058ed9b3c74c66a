#include <kagi/lock/events.hpp>

#include <gtest/gtest.h>

#include <kagi/lock/errors.hpp>
#include "service_fixture.hpp"

namespace kagi::lock {
namespace {

using namespace std::chrono_literals;
using testing::ServiceTest;

TEST(EventLogTest, KeepsTheNewestUpToCapacityAndCountsAll) {
  EventLog log(2);
  const HolderInfo who{.request_id = "r", .method = "GET", .path = "/p", .client_address = "::1"};
  log.record(EventKind::kTimeout, "a/1", Mode::kShared, who, "one");
  log.record(EventKind::kLeak, "a/2", Mode::kExclusive, who, "two");
  log.record(EventKind::kOrderViolation, "a/3", Mode::kShared, who, "three");
  auto events = log.recent();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "a/3");  // newest first
  EXPECT_EQ(events[1].name, "a/2");
  EXPECT_EQ(events[1].mode, Mode::kExclusive);
  EXPECT_EQ(events[1].who.path, "/p");
  EXPECT_EQ(log.recorded(), 3u);
  EXPECT_GT(events[0].time.time_since_epoch().count(), 0);
}

TEST(EventLogTest, KindNames) {
  EXPECT_EQ(to_string(EventKind::kTimeout), "timeout");
  EXPECT_EQ(to_string(EventKind::kLeak), "leak");
  EXPECT_EQ(to_string(EventKind::kOrderViolation), "order_violation");
}

class LockEventsTest : public ServiceTest {};

TEST_F(LockEventsTest, TimeoutIsRecordedWithTheWaitingRequest) {
  auto a = request("a");
  auto b = request("b");
  auto held = a->exclusive("bbs/board/3");
  EXPECT_THROW((void)b->shared("bbs/board/3", 20ms), LockBusy);
  auto events = service_->recent_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kTimeout);
  EXPECT_EQ(events[0].name, "bbs/board/3");
  EXPECT_EQ(events[0].mode, Mode::kShared);
  EXPECT_EQ(events[0].who.request_id, "b");
  EXPECT_EQ(events[0].who.path, "/test/b");
  EXPECT_NE(events[0].detail.find("gave up after"), std::string::npos);
}

TEST_F(LockEventsTest, LeakAndOrderViolationAreRecorded) {
  auto ctx = request("c");
  auto q = ctx->exclusive("order/q");
  auto p = ctx->exclusive("order/p");  // 'p' sorts before the held 'q': reported, not refused
  q.release();
  EXPECT_EQ(ctx->end_request(), 1u);  // 'p' is still held: a leak
  auto events = service_->recent_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::kLeak);
  EXPECT_EQ(events[0].name, "order/p");
  EXPECT_EQ(events[1].kind, EventKind::kOrderViolation);
  EXPECT_EQ(events[1].name, "order/p");
  EXPECT_NE(events[1].detail.find("order/q"), std::string::npos);
  EXPECT_EQ(events[1].who.request_id, "c");
}

TEST_F(LockEventsTest, SuccessfulAcquiresRecordNothing) {
  auto ctx = request("d");
  for (int i = 0; i < 10; ++i) (void)ctx->exclusive("quiet/a");
  EXPECT_TRUE(service_->recent_events().empty());
}

}  // namespace
}  // namespace kagi::lock
