#include <kagi/store/lock_domain_claim.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.hpp"

namespace kagi::store {
namespace {

std::string recorded(const std::string& dir) {
  std::ifstream in(dir + "/.kagi-lock-domain");
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(LockDomainClaim, AFreshFolderRecordsTheFirstDomainAndAcceptsIt) {
  test_support::TempDir dir;
  EXPECT_TRUE(claim_lock_domain(dir.path(), "local host=a dir=/l", false).ok());
  EXPECT_EQ(recorded(dir.path()), "local host=a dir=/l");
  EXPECT_TRUE(claim_lock_domain(dir.path(), "local host=a dir=/l", false).ok());
}

TEST(LockDomainClaim, AnotherDomainIsRefusedNamingBothAndTheWayOut) {
  test_support::TempDir dir;
  ASSERT_TRUE(claim_lock_domain(dir.path(), "local host=a dir=/l", false).ok());
  const Status s = claim_lock_domain(dir.path(), "local host=b dir=/l", false);
  EXPECT_EQ(s.code(), Errc::kForeignLockDomain);
  EXPECT_NE(s.message().find("'local host=a dir=/l'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'local host=b dir=/l'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("postgres"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("data.adopt_lock_domain"), std::string::npos) << s.message();
  EXPECT_EQ(recorded(dir.path()), "local host=a dir=/l");  // unchanged
}

TEST(LockDomainClaim, AdoptingMovesTheFolderToTheNewDomain) {
  test_support::TempDir dir;
  ASSERT_TRUE(claim_lock_domain(dir.path(), "local host=a dir=/l", false).ok());
  EXPECT_TRUE(claim_lock_domain(dir.path(), "postgres host=db port=5432 dbname=s", true).ok());
  EXPECT_EQ(recorded(dir.path()), "postgres host=db port=5432 dbname=s");
  EXPECT_FALSE(claim_lock_domain(dir.path(), "local host=a dir=/l", false).ok());
}

// Processes of two domains starting at once on a fresh folder: exactly one claims it, the
// others are compared with the winner's record and refused.
TEST(LockDomainClaim, OfManyClaimingAFreshFolderAtOnceExactlyOneWins) {
  for (int round = 0; round < 20; ++round) {
    test_support::TempDir dir;
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        if (claim_lock_domain(dir.path(), "domain-" + std::to_string(i), false).ok()) ++ok;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load(), 1) << "round " << round;
    EXPECT_EQ(recorded(dir.path()).rfind("domain-", 0), 0u);
  }
}

TEST(LockDomainClaim, AnUnwritableFolderIsAnErrorNotAClaim) {
  const Status s = claim_lock_domain("/nonexistent/kagi-data", "local host=a dir=/l", false);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/kagi-data/.kagi-lock-domain"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace kagi::store
