// lockd/protocol.hpp: every command of the grammar, and the lines it refuses with a reason.
#include <kagi/lockd/protocol.hpp>

#include <gtest/gtest.h>

namespace kagi::lockd {
namespace {

Command parsed(std::string_view line, ParseLimits limits = {}) {
  Command cmd;
  std::string why;
  EXPECT_TRUE(parse_line(line, limits, cmd, &why)) << line << ": " << why;
  return cmd;
}

std::string refused(std::string_view line, ParseLimits limits = {}) {
  Command cmd;
  std::string why;
  EXPECT_FALSE(parse_line(line, limits, cmd, &why)) << line;
  EXPECT_FALSE(why.empty()) << line;
  return why;
}

TEST(Protocol, TheSeedsLockIsTheBareForm) {
  Command c = parsed("LOCK lockKey");
  EXPECT_EQ(c.verb, Verb::kLock);
  EXPECT_TRUE(c.seed_form);
  ASSERT_EQ(c.keys.size(), 1u);
  EXPECT_EQ(c.keys[0], "lockKey");
  EXPECT_EQ(c.modes[0], Mode::kExclusive);
  EXPECT_EQ(c.timeout_ms, -1);
  EXPECT_TRUE(parsed("LOCK lockKey\r").seed_form);  // \r\n clients
  EXPECT_EQ(parsed("LOCK caf\xc3\xa9/\xe9\x8d\xb5").keys[0], "caf\xc3\xa9/\xe9\x8d\xb5");
}

TEST(Protocol, ExtendedLocksCarryABound) {
  Command c = parsed("LOCK bbs/3 2500");
  EXPECT_FALSE(c.seed_form);
  EXPECT_EQ(c.timeout_ms, 2500);
  c = parsed("LOCK bbs/3 0");
  EXPECT_EQ(c.timeout_ms, 0);
  c = parsed("SHARED bbs/3");
  EXPECT_EQ(c.verb, Verb::kShared);
  EXPECT_FALSE(c.seed_form);
  EXPECT_EQ(c.modes[0], Mode::kShared);
  EXPECT_EQ(c.timeout_ms, -1);
  EXPECT_EQ(parsed("SHARED bbs/3 10").timeout_ms, 10);
}

TEST(Protocol, LockSetModes) {
  Command c = parsed("LOCKSET exclusive b a");
  EXPECT_EQ(c.verb, Verb::kLockSet);
  EXPECT_EQ(c.keys, (std::vector<std::string_view>{"b", "a"}));
  EXPECT_EQ(c.modes, (std::vector<Mode>{Mode::kExclusive, Mode::kExclusive}));
  EXPECT_EQ(c.timeout_ms, -1);
  c = parsed("LOCKSET shared/500 a b c");
  EXPECT_EQ(c.modes, (std::vector<Mode>{Mode::kShared, Mode::kShared, Mode::kShared}));
  EXPECT_EQ(c.timeout_ms, 500);
  c = parsed("LOCKSET xsx/0 p q r");
  EXPECT_EQ(c.modes, (std::vector<Mode>{Mode::kExclusive, Mode::kShared, Mode::kExclusive}));
  EXPECT_EQ(c.timeout_ms, 0);
}

TEST(Protocol, TheOtherCommands) {
  EXPECT_EQ(parsed("UNLOCK").keys.size(), 0u);
  EXPECT_EQ(parsed("UNLOCK a/b").keys[0], "a/b");
  Command v = parsed("VERIFY a 1732000000000123");
  EXPECT_EQ(v.verb, Verb::kVerify);
  EXPECT_EQ(v.token, 1732000000000123u);
  Command c = parsed("CLIENT kagi/web1/812 1f POST /bbs/3/post");
  EXPECT_EQ(c.verb, Verb::kClient);
  EXPECT_EQ(c.text, "kagi/web1/812 1f POST /bbs/3/post");
  EXPECT_EQ(parsed("AUTH s3cret").text, "s3cret");
  EXPECT_EQ(parsed("STATUS").verb, Verb::kStatus);
  EXPECT_EQ(parsed("PING").verb, Verb::kPing);
}

TEST(Protocol, BadLinesSayWhy) {
  EXPECT_NE(refused("").find("empty command"), std::string::npos);
  EXPECT_NE(refused("lock a").find("unknown command"), std::string::npos);
  EXPECT_NE(refused("FROB a").find("unknown command"), std::string::npos);
  EXPECT_NE(refused("LOCK").find("empty key"), std::string::npos);
  EXPECT_NE(refused("LOCK  a").find("empty key"), std::string::npos);
  EXPECT_NE(refused("LOCK a ").find("bad timeout"), std::string::npos);
  EXPECT_NE(refused("LOCK a -1").find("bad timeout"), std::string::npos);
  EXPECT_NE(refused("LOCK a 86400001").find("bad timeout"), std::string::npos);
  EXPECT_NE(refused("LOCK a 1 2").find("too many words"), std::string::npos);
  EXPECT_NE(refused("LOCK a\tb").find("control character 0x09"), std::string::npos);
  EXPECT_NE(refused(std::string_view("LOCK a\0b", 8)).find("control character"), std::string::npos);
  EXPECT_NE(refused("LOCK \xc2\x85x").find("control character in key"), std::string::npos);
  EXPECT_NE(refused("LOCK \xff").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(refused("LOCK \xc0\xaf").find("not valid UTF-8"), std::string::npos);  // overlong
  EXPECT_NE(refused("LOCK " + std::string(257, 'k')).find("longer than 256"), std::string::npos);
  EXPECT_NE(refused("LOCKSET exclusive").find("at least one key"), std::string::npos);
  EXPECT_NE(refused("LOCKSET xs a").find("names 2 keys, 1 are given"), std::string::npos);
  EXPECT_NE(refused("LOCKSET xs a b c").find("more are given"), std::string::npos);
  EXPECT_NE(refused("LOCKSET xq a b").find("bad LOCKSET mode"), std::string::npos);
  EXPECT_NE(refused("LOCKSET shared/x a").find("bad timeout"), std::string::npos);
  EXPECT_NE(refused("LOCKSET exclusive a b a").find("listed twice"), std::string::npos);
  EXPECT_NE(refused("VERIFY a").find("needs a key and a token"), std::string::npos);
  EXPECT_NE(refused("VERIFY a x1").find("needs a key and a token"), std::string::npos);
  EXPECT_NE(refused("UNLOCK a b").find("one key or none"), std::string::npos);
  EXPECT_NE(refused("PING x").find("no arguments"), std::string::npos);
  EXPECT_NE(refused("CLIENT").find("needs text"), std::string::npos);
  EXPECT_NE(refused("CLIENT " + std::string(600, 'x')).find("longer than 512"), std::string::npos);
}

TEST(Protocol, LimitsComeFromTheConf) {
  ParseLimits small;
  small.max_key_bytes = 4;
  small.max_keys = 2;
  EXPECT_EQ(parsed("LOCK abcd", small).keys[0], "abcd");
  EXPECT_NE(refused("LOCK abcde", small).find("longer than 4"), std::string::npos);
  EXPECT_NE(refused("LOCKSET shared a b c", small).find("too many keys"), std::string::npos);
}

}  // namespace
}  // namespace kagi::lockd
