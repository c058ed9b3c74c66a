// The host statistics files are the owner's only: their events name clients and routes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <kagi/lock/lock_service.hpp>
#include <kagi/stats/host_stats.hpp>
#include "../support/file_mode.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::stats {
namespace {

using test_support::mode_of;

TEST(HostStatsFileModesTest, StatsDirAndFilesAreOwnerOnly) {
  test_support::ScopedUmask umask(022);
  test_support::TempDir tmp;
  lock::LockOptions options;
  options.dir = tmp.path() + "/locks";
  auto locks = lock::LockService::create(options);
  RequestStats requests;
  StatsPublisher publisher(*locks, requests, {std::chrono::milliseconds(60000), {}});
  requests.record("GET /t", 200, std::chrono::milliseconds(1));
  publisher.publish_now();

  const std::string dir = options.dir + "/stats";
  EXPECT_EQ(mode_of(dir), 0700);
  int live = 0, stats = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string ext = e.path().extension();
    live += ext == ".live";
    stats += ext == ".stats";
    EXPECT_EQ(mode_of(e.path()), 0600) << e.path();
  }
  EXPECT_EQ(live, 1);
  EXPECT_EQ(stats, 1);
}

}  // namespace
}  // namespace kagi::stats
