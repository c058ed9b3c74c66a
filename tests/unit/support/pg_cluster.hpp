// tests/unit/support/pg_cluster.hpp — the PostgreSQL server of a gtest binary
// (tests/support/pg_cluster.hpp), and KAGI_NEED_POSTGRES for its tests.
//
//   KAGI_NEED_POSTGRES(pg);                 // starts it on first use (a second or two)
//   options.postgres.dsn = pg->dsn();
//
// Without the server binaries a test is skipped, or fails when KAGI_PG_REQUIRED=1 (scripts/test
// sets it: there, a skip would hide a broken setup).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../../support/pg_cluster.hpp"

namespace kagi::test_support {

inline bool postgres_required() {
  const char* v = std::getenv("KAGI_PG_REQUIRED");
  return v && std::string(v) == "1";
}

}  // namespace kagi::test_support

// In a test body or SetUp(): declares `var`, the shared cluster, or ends the test here
// (skipped, or failed when KAGI_PG_REQUIRED=1).
#define KAGI_NEED_POSTGRES(var)                                                               \
  std::string var##_why;                                                                      \
  ::kagi::test_support::PgCluster* var = ::kagi::test_support::PgCluster::shared(&var##_why); \
  if (!var) {                                                                                 \
    if (::kagi::test_support::postgres_required()) {                                          \
      GTEST_FAIL() << "PostgreSQL is required here: " << var##_why;                           \
    }                                                                                         \
    GTEST_SKIP() << "no PostgreSQL server: " << var##_why;                                    \
  }
