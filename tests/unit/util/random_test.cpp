#include <kagi/util/random.hpp>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include <kagi/util/process.hpp>

namespace kagi::util {
namespace {

bool is_lower_hex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

TEST(Random, HexOfTheAskedLengthNeverRepeated) {
  std::set<std::string> seen;
  // More than one 512-byte buffer's worth, in odd sizes that straddle refills.
  for (int i = 0; i < 2000; ++i) {
    std::string t = random_hex(static_cast<size_t>(1 + i % 37));
    ASSERT_EQ(t.size(), static_cast<size_t>(2 * (1 + i % 37)));
    ASSERT_TRUE(is_lower_hex(t)) << t;
    if (t.size() >= 16) {
      EXPECT_TRUE(seen.insert(t).second) << "repeated token " << t;
    }
  }
  EXPECT_EQ(random_hex(0), "");
  EXPECT_EQ(random_hex(4096).size(), 8192u);  // larger than the buffer
}

TEST(Random, ThreadsGetDifferentBytes) {
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = random_hex(16); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), got.size());
}

// The buffered bytes must not be shared with a child: after fork() the parent's next token
// and the child's first one would otherwise be the same bytes.
TEST(Random, AChildNeverRepeatsItsParentsTokens) {
  (void)random_hex(8);  // the parent's buffer now holds unused bytes
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string t = random_hex(16);
    t += current_pid() == ::getpid() ? "+" : "-";
    ssize_t n = ::write(fds[1], t.data(), t.size());
    ::_exit(n == static_cast<ssize_t>(t.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  const std::string mine = random_hex(16);
  char buf[64] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(n, 33);
  const std::string theirs(buf, 32);
  EXPECT_NE(theirs, mine);
  EXPECT_EQ(buf[32], '+') << "current_pid() in the child is not the child's pid";
  EXPECT_EQ(current_pid(), ::getpid());
}

TEST(Random, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

}  // namespace
}  // namespace kagi::util
