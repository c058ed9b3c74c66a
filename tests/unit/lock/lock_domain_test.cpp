#include <kagi/lock/lock_domain.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "../support/temp_dir.hpp"

namespace kagi::lock {
namespace {

TEST(LockDomain, LocalIsTheHostAndTheCanonicalLockFolder) {
  test_support::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/a/b");
  LockOptions one, two, other;
  one.dir = dir.path() + "/a/b";
  two.dir = dir.path() + "/a/../a/b/";  // the same folder, spelled another way
  other.dir = dir.path() + "/a";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(lock_domain(one), "local host=" + std::string(host) +
                                  " dir=" + std::filesystem::canonical(one.dir).string());
  EXPECT_EQ(lock_domain(one), lock_domain(two));
  EXPECT_NE(lock_domain(one), lock_domain(other));
}

TEST(LockDomain, PostgresIsTheDatabaseWhateverTheRoleOrTheSpelling) {
  LockOptions a, b, c, d;
  a.backend = b.backend = c.backend = d.backend = "postgres";
  a.postgres.dsn = "host=db1 port=5432 dbname=site user=kagi password=secret";
  b.postgres.dsn = "postgresql://other:pw@db1:5432/site";
  c.postgres.dsn = "host=db1 port=5432 dbname=elsewhere user=kagi";
  d.postgres.dsn = "host=db2 port=5432 dbname=site user=kagi";
  EXPECT_EQ(lock_domain(a), "postgres host=db1 port=5432 dbname=site");
  EXPECT_EQ(lock_domain(a), lock_domain(b));
  EXPECT_NE(lock_domain(a), lock_domain(c));
  EXPECT_NE(lock_domain(a), lock_domain(d));
  EXPECT_EQ(lock_domain(a).find("secret"), std::string::npos);
}

}  // namespace
}  // namespace kagi::lock
