// lockd/options.hpp: the [lockd] keys, conf/kagi-lockd.toml as their reference, and the
// options kagi-lockd reads from them.
#include <kagi/lockd/options.hpp>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>

#include <fstream>
#include <iterator>
#include <string>

namespace kagi::lockd {
namespace {

config::Schema lockd_schema() {
  config::Schema schema = config::Schema::framework();
  schema.add_section("lockd", conf_keys(), "kagi-lockd");
  return schema;
}

TEST(LockdOptions, ShippedFileStatesEveryDefault) {
  const std::string path = std::string(KAGI_SOURCE_DIR) + "/conf/kagi-lockd.toml";
  const Config shipped = Config::load(lockd_schema(), path, {});
  EXPECT_EQ(shipped.dump(), Config::defaults(lockd_schema()).dump());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& spec : conf_keys()) {
    const std::string key(spec.key);
    EXPECT_NE(text.find("\n" + key.substr(key.find('.') + 1) + " = "), std::string::npos)
        << key << " is not documented";
  }
}

TEST(LockdOptions, DefaultsAreTheSeedsPortOnLoopback) {
  const ServerOptions o = server_options(Config::defaults(lockd_schema()));
  EXPECT_EQ(o.listen, std::vector<std::string>{"127.0.0.1:1006"});
  EXPECT_EQ(o.socket_mode, 0660);
  EXPECT_TRUE(o.allow.empty());
  EXPECT_TRUE(o.secret.empty());
  EXPECT_EQ(o.max_key_bytes, 256u);
}

TEST(LockdOptions, SecretFileAndBadValues) {
  char path[] = "/tmp/kagi-lockd-secret-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "s3cret\n", 7), 7);
  ::close(fd);
  const std::string file(path);
  ServerOptions o = server_options(
      Config::load(lockd_schema(), std::nullopt,
                   {"lockd.secret_file=" + file, "lockd.allow=10.0.0.0/8,192.0.2.7"}));
  EXPECT_EQ(o.secret, "s3cret");
  EXPECT_EQ(o.allow, (std::vector<std::string>{"10.0.0.0/8", "192.0.2.7"}));
  ::unlink(path);
  EXPECT_THROW(
      server_options(Config::load(lockd_schema(), std::nullopt, {"lockd.secret_file=" + file})),
      ConfigError);
  EXPECT_THROW(
      server_options(Config::load(lockd_schema(), std::nullopt, {"lockd.socket_mode=0999"})),
      ConfigError);
  EXPECT_THROW(Config::load(lockd_schema(), std::nullopt, {"lockd.max_key_bytes=0"}), ConfigError);
}

// AUTH carries the secret on one line of at most 512 bytes of UTF-8 text: a secret_file it
// could never send is refused at start, not by every client later.
TEST(LockdOptions, ASecretThatAuthCannotCarryIsRefusedAtStart) {
  char path[] = "/tmp/kagi-lockd-secret-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string file(path);
  auto load = [&](const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    return server_options(
        Config::load(lockd_schema(), std::nullopt, {"lockd.secret_file=" + file}));
  };
  EXPECT_EQ(load("with spaces and caf\xc3\xa9\r\n").secret, "with spaces and caf\xc3\xa9");
  EXPECT_EQ(load(std::string(512, 's') + "\n").secret.size(), 512u);
  for (const std::string& bad :
       {std::string(513, 's'), std::string("tab\there"), std::string("two\nlines"),
        std::string("latin1 \xe9"), std::string("\n")}) {
    try {
      load(bad);
      ADD_FAILURE() << "accepted a secret AUTH cannot send: '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("512 bytes of UTF-8"), std::string::npos) << e.what();
    }
  }
  ::unlink(path);
}

TEST(LockdOptions, SocketGroupAndLocalConnections) {
  const ServerOptions o = server_options(
      Config::load(lockd_schema(), std::nullopt,
                   {"lockd.socket_group=www-data", "lockd.max_local_connections=300"}));
  EXPECT_EQ(o.socket_group, "www-data");
  EXPECT_EQ(o.max_local_connections, 300u);
  const ServerOptions d = server_options(Config::defaults(lockd_schema()));
  EXPECT_EQ(d.socket_group, "");
  EXPECT_EQ(d.max_local_connections, 0u);
}

// The value of `key=` in a systemd unit file ("" if absent; the last one if repeated).
std::string unit_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line, value;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) == 0) value = line.substr(key.size() + 1);
  }
  return value;
}

// systemd re-owns a unit's RuntimeDirectory= at start and removes it, with everything in it, at
// stop: kagi-lockd's must not be the folder of kagi.socket's FastCGI socket (/run/kagi), and
// its socket reaches PHP through a group kagi-lockd belongs to.
TEST(LockdOptions, TheSystemdUnitKeepsToAFolderOfItsOwn) {
  const std::string dir = std::string(KAGI_SOURCE_DIR) + "/conf/systemd/";
  const std::string runtime = unit_value(dir + "kagi-lockd.service", "RuntimeDirectory");
  const std::string fcgi = unit_value(dir + "kagi.socket", "ListenStream");
  ASSERT_EQ(fcgi.rfind("/run/", 0), 0u) << fcgi;
  EXPECT_EQ(runtime, "kagi-lockd");
  EXPECT_NE(fcgi.substr(0, fcgi.rfind('/')), "/run/" + runtime)
      << "kagi-lockd.service would take over kagi.socket's folder";
  EXPECT_EQ(unit_value(dir + "kagi-lockd.service", "SupplementaryGroups"), "www-data");
}

}  // namespace
}  // namespace kagi::lockd
