#include <kagi/lock/lock_domain.hpp>
#include <kagi/util/process.hpp>

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

// One kagi-lockd is one domain; "127.0.0.1:1006" (or a unix socket) is a server per host.
TEST(LockDomain, LockdIsTheServerAndLoopbackIsPerHost) {
  LockOptions a, b, c;
  a.backend = b.backend = c.backend = "lockd";
  a.lockd.address = "10.0.0.5:1006";
  b.lockd.address = "127.0.0.1:1006";
  c.lockd.address = "unix:/run/kagi-lockd/lockd.sock";
  EXPECT_EQ(lock_domain(a), "lockd address=10.0.0.5:1006");
  EXPECT_EQ(lock_domain(b), "lockd host=" + util::host_name() + " address=127.0.0.1:1006");
  EXPECT_NE(lock_domain(c).find("host=" + util::host_name()), std::string::npos);
}

}  // namespace
}  // namespace kagi::lock
