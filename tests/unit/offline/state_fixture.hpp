// tests/unit/offline/state_fixture.hpp — a StateStore of each backend for the offline suites:
// SQLite in a fresh folder, PostgreSQL in a fresh database of the test's server.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <kagi/offline/state_store.hpp>
#include "../support/pg_cluster.hpp"
#include "../support/temp_dir.hpp"

namespace kagi::offline {

class StateTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    options_.backend = GetParam();
    options_.dir = dir_.path();
    options_.fsync = false;  // what is tested here does not depend on flushing (and is faster)
    if (GetParam() == "postgres") {
      KAGI_NEED_POSTGRES(pg);
      options_.postgres.dsn = pg->fresh_database_dsn();
      options_.postgres.application_name = "kagi-test";
    }
  }
  // A store as one process of the site opens it (each call: another "process").
  std::shared_ptr<StateStore> open_store() {
    std::string why;
    std::shared_ptr<StateStore> store = open_state_store(options_, &why);
    EXPECT_TRUE(store) << why;
    return store;
  }

  test_support::TempDir dir_;
  StateOptions options_;
};

inline std::string backend_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace kagi::offline
