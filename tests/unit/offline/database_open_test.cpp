// Several processes opening one new SQLite database at once (a site's processes starting
// together: spawn-fcgi -F, systemd): every one must open it, none may fail because another
// was switching it to WAL or creating the schema at that moment.
#include <kagi/sqlite/database.hpp>

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../../support/child_process.hpp"

namespace kagi::sqlite {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT);"
    "CREATE TABLE IF NOT EXISTS u (k TEXT PRIMARY KEY, v TEXT);";

TEST(DatabaseOpenTest, ProcessesOpeningANewDatabaseAtOnceAllSucceed) {
  char tmpl[] = "/tmp/kagi-sqlite-open-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path root = tmpl;
  constexpr int kRounds = 40, kProcesses = 6;
  int failures = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = (root / ("r" + std::to_string(round) + ".db")).string();
    std::vector<pid_t> children;
    for (int p = 0; p < kProcesses; ++p) {
      children.push_back(test_support::spawn([&] {
        std::string why;
        auto db = Database::open(Options{.path = path}, kSchema, &why);
        if (!db) {
          std::fprintf(stderr, "round %d: %s\n", round, why.c_str());
          return 1;
        }
        return 0;
      }));
    }
    for (pid_t c : children) failures += test_support::wait_exit(c) != 0;
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  EXPECT_EQ(failures, 0) << "of " << kRounds * kProcesses << " opens";
}

}  // namespace
}  // namespace kagi::sqlite
