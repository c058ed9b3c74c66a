#include <kagi/config/config.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <kagi/config/schema.hpp>

namespace kagi {
namespace {

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/kagi-config-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(Config, DefaultsCoverEverySchemaKey) {
  Config conf = Config::defaults();
  EXPECT_EQ(conf.get_int("server.threads"), 4);
  EXPECT_EQ(conf.get_int("limits.max_body_bytes"), 1048576);
  EXPECT_EQ(conf.get_string("data.fsync"), "always");
  EXPECT_EQ(conf.get_strings("bbs.boards"), std::vector<std::string>{"general"});
  EXPECT_EQ(conf.get_strings("admin.allow"), (std::vector<std::string>{"127.0.0.1", "::1"}));
  EXPECT_FALSE(conf.get_bool("test.routes"));
}

TEST(Config, ShippedFileLoadsAndDocumentsEveryKeyWithItsDefault) {
  const std::string path = std::string(KAGI_SOURCE_DIR) + "/conf/kagi.toml";
  Config shipped = Config::load(path, {});
  // The shipped file states the defaults: loading it changes nothing.
  EXPECT_EQ(shipped.dump(), Config::defaults().dump());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& spec : config::schema()) {
    std::string key(spec.key);
    std::string name = key.substr(key.find('.') + 1);
    EXPECT_NE(text.find("\n" + name + " = "), std::string::npos) << key << " is not documented";
  }
}

TEST(Config, FileThenOverridesApplyInOrder) {
  std::string path = write_temp("[server]\nthreads = 8\n[bbs]\nboards = [\"a\", \"b\"]\n");
  Config conf = Config::load(path, {"server.threads=16", "chat.rooms = x, y"});
  EXPECT_EQ(conf.get_int("server.threads"), 16);
  EXPECT_EQ(conf.get_strings("bbs.boards"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(conf.get_strings("chat.rooms"), (std::vector<std::string>{"x", "y"}));
  std::remove(path.c_str());
}

TEST(Config, UnknownKeyIsNamed) {
  try {
    Config::load(std::nullopt, {"server.thread=4"});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("server.thread"), std::string::npos) << e.what();
  }
  std::string path = write_temp("[locks]\ntimeout = 5\n");
  EXPECT_THROW(Config::load(path, {}), ConfigError);
  std::remove(path.c_str());
}

TEST(Config, BadValuesAreNamedWithWhatIsExpected) {
  auto message = [](const std::string& assignment) {
    try {
      Config::load(std::nullopt, {assignment});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("server.threads=0").find("from 1 to 512"), std::string::npos);
  EXPECT_NE(message("server.threads=4x").find("server.threads"), std::string::npos);
  EXPECT_NE(message("data.fsync=sometimes").find("always|never"), std::string::npos);
  EXPECT_NE(message("log.access=yes").find("true or false"), std::string::npos);
  EXPECT_NE(message("no-equals-sign").find("section.key=value"), std::string::npos);
}

TEST(Config, WrongTomlTypeIsRefused) {
  std::string path = write_temp("[server]\nthreads = \"four\"\n");
  EXPECT_THROW(Config::load(path, {}), ConfigError);
  std::remove(path.c_str());
  path = write_temp("threads = 4\n");  // a value outside any [section]
  EXPECT_THROW(Config::load(path, {}), ConfigError);
  std::remove(path.c_str());
  path = write_temp("[server\nthreads = 4\n");  // broken TOML
  EXPECT_THROW(Config::load(path, {}), ConfigError);
  std::remove(path.c_str());
}

TEST(Config, MissingFileIsAClearError) {
  try {
    Config::load("/nonexistent/kagi.toml", {});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kagi.toml"), std::string::npos);
  }
}

}  // namespace
}  // namespace kagi
