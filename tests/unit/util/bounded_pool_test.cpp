// util/bounded_pool.hpp: an idle connection the server closed meanwhile is replaced, and
// closed without the pool's mutex held (closing a socket may take a while; other threads
// must not wait for it).
#include <kagi/util/bounded_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace kagi::util {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

struct Conn;
using Pool = BoundedPool<Conn>;

std::atomic<bool> g_closed_under_lock{false};
std::shared_ptr<std::atomic<bool>> g_probe_done;

// A connection whose closing asks, from another thread, whether the pool's mutex is free.
struct Conn {
  Pool* pool = nullptr;
  bool stale = false;  // the server closed it while it was idle
  SteadyClock::time_point idle_since;

  bool broken() const { return false; }
  bool closed_while_idle() { return stale; }
  ~Conn() {
    if (!stale) return;
    auto done = g_probe_done = std::make_shared<std::atomic<bool>>(false);
    std::thread([p = pool, done] {
      (void)p->open_connections();  // takes the pool's mutex
      done->store(true);
    }).detach();
    const auto deadline = SteadyClock::now() + 200ms;
    while (!done->load() && SteadyClock::now() < deadline) std::this_thread::sleep_for(1ms);
    if (!done->load()) g_closed_under_lock = true;
  }
};

TEST(BoundedPool, AStaleIdleConnectionIsReplacedAndClosedWithoutTheMutex) {
  Pool* self = nullptr;
  int opened = 0;
  Pool pool(
      {.max = 2, .check_idle_after = 0ms},
      [&](SteadyClock::time_point, std::error_code& ec, std::string*) {
        ec.clear();
        ++opened;
        auto c = std::make_unique<Conn>();
        c->pool = self;
        return c;
      },
      [](std::string*) { return std::make_error_code(std::errc::resource_unavailable_try_again); });
  self = &pool;
  std::error_code ec;
  auto conn = pool.take(SteadyClock::now() + 1s, ec, nullptr);
  ASSERT_TRUE(conn);
  conn->stale = true;
  pool.give_back(std::move(conn));
  auto next = pool.take(SteadyClock::now() + 1s, ec, nullptr);
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->stale);
  EXPECT_EQ(opened, 2);
  EXPECT_EQ(pool.open_connections(), 1u);
  EXPECT_FALSE(g_closed_under_lock) << "the stale connection was closed with the mutex held";
  ASSERT_TRUE(g_probe_done);
  while (!g_probe_done->load()) std::this_thread::sleep_for(1ms);  // done before the pool goes
  pool.give_back(std::move(next));
}

}  // namespace
}  // namespace kagi::util
