// The booking app in one process, through kagi's real pipeline: the page, a booking, the
// errors, and the promise the app makes: an hour is never booked twice, however many people
// try at the same moment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <kagi/app/app.hpp>
#include <kagi/app/test_client.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../booking.hpp"

namespace {

namespace fs = std::filesystem;

// [tutorial:fixture]
class BookingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const kagi::AppModule booking = booking::module();
    kagi::Config conf = kagi::Config::load(
        kagi::schema_for({booking}), std::nullopt,
        {"templates.dir=" BOOKING_TEMPLATES, "templates.fallback_dir=" KAGI_TEMPLATES,
         "locks.dir=" + (dir_ / "locks").string(), "data.dir=" + (dir_ / "data").string(),
         "data.fsync=never", "log.access=false", "locks.timeout_ms=20000", "booking.rooms=orchid"});
    app_ = std::make_unique<kagi::App>(std::move(conf));
    booking.mount(*app_);
  }
  void TearDown() override {
    app_.reset();
    fs::remove_all(dir_);
  }

  // Waits (at most 10 s) until `n` requests wait for a lock, as the lock registry shows.
  void wait_until_waiting(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto entries = app_->locks().snapshot().entries;
      if (std::count_if(entries.begin(), entries.end(), [](const auto& e) { return e.waiting; }) >=
          static_cast<std::ptrdiff_t>(n)) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << n << " requests never waited for the lock";
  }

  fs::path dir_ = fs::path(::testing::TempDir()) / ("booking-test-" + std::to_string(getpid()));
  std::unique_ptr<kagi::App> app_;
};
// [end]

TEST_F(BookingTest, ThePageShowsEveryHourFree) {
  kagi::TestClient browser(*app_);
  const auto page = browser.get("/booking/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("9:00"), std::string::npos);
  EXPECT_NE(page.body.find("17:00"), std::string::npos);
  EXPECT_EQ(page.body.find("booked by"), std::string::npos);
}

TEST_F(BookingTest, ABookingIsShownAndItsNameEscaped) {
  kagi::TestClient browser(*app_);
  EXPECT_EQ(browser.post_form("/booking/orchid/book", {{"hour", "10"}, {"name", "<ann>"}}).status,
            303);
  const auto page = browser.get("/booking/");
  EXPECT_NE(page.body.find("booked by &lt;ann&gt;"), std::string::npos) << page.body;
}

TEST_F(BookingTest, BadInputIsRefusedWithTheRightStatus) {
  kagi::TestClient browser(*app_);
  EXPECT_EQ(browser.post_form("/booking/orchid/book", {{"hour", "8"}, {"name", "a"}}).status, 400);
  EXPECT_EQ(browser.post_form("/booking/orchid/book", {{"hour", "x"}, {"name", "a"}}).status, 400);
  EXPECT_EQ(browser.post_form("/booking/orchid/book", {{"hour", "9"}, {"name", ""}}).status, 400);
  EXPECT_EQ(browser.post_form("/booking/attic/book", {{"hour", "9"}, {"name", "a"}}).status, 404);
  // A post without the CSRF token (another site's form) is refused by the pipeline.
  kagi::http::Request forged;
  forged.method = "POST";
  forged.target = "/booking/orchid/book";
  forged.headers.add("Content-Type", "application/x-www-form-urlencoded");
  forged.body = "hour=9&name=mallory";
  EXPECT_EQ(browser.send(forged).status, 403);
}

// [tutorial:race]
// Eight people press "Book" on the same hour at the same moment. To make "the same moment"
// certain, the test holds the room's lock (as a slow request would) until all eight requests
// wait for it, then lets them go at once: exactly one booking, seven 409s.
TEST_F(BookingTest, EightPeopleBookingTheSameHourAtOnceGiveOneBooking) {
  auto slow_request = app_->locks().context({"test", "POST", "/booking/orchid/book", "test"});
  auto room = slow_request->exclusive("booking/orchid");

  std::atomic<int> booked{0}, refused{0};
  std::vector<std::thread> people;
  for (int i = 0; i < 8; ++i) {
    people.emplace_back([&, i] {
      kagi::TestClient browser(*app_, "192.0.2." + std::to_string(i + 1));
      const auto answer = browser.post_form(
          "/booking/orchid/book", {{"hour", "11"}, {"name", "person " + std::to_string(i)}});
      if (answer.status == 303) ++booked;
      if (answer.status == 409) ++refused;
    });
  }
  wait_until_waiting(8);  // every request now waits for the room
  room.release();
  for (auto& person : people) person.join();
  EXPECT_EQ(booked, 1);
  EXPECT_EQ(refused, 7);
}
// [end]

}  // namespace
