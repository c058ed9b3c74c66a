#include <kagi/config/config.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
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

// An app's section, as an app declares it (app/app_module.hpp).
constexpr config::KeySpec kGuestbookKeys[] = {
    {"guestbook.entries", config::KeyType::kInt, "500", 1, 100000, "", "entries kept"},
    {"guestbook.title", config::KeyType::kString, "Guestbook", 0, 0, "", "page title"},
};

config::Schema guestbook_schema() {
  config::Schema schema = config::Schema::framework();
  schema.add_section("guestbook", kGuestbookKeys, "a guestbook");
  return schema;
}

TEST(Config, DefaultsCoverEveryFrameworkKey) {
  Config conf = Config::defaults();
  EXPECT_EQ(conf.get_int("server.threads"), 4);
  EXPECT_EQ(conf.get_int("limits.max_body_bytes"), 1048576);
  EXPECT_EQ(conf.get_string("data.fsync"), "always");
  for (const auto& spec : conf.schema().keys()) {
    const std::string key(spec.key);
    switch (spec.type) {
      case config::KeyType::kBool:
        EXPECT_NO_THROW(conf.get_bool(key)) << key;
        break;
      case config::KeyType::kInt:
        EXPECT_NO_THROW(conf.get_int(key)) << key;
        break;
      case config::KeyType::kString:
        EXPECT_NO_THROW(conf.get_string(key)) << key;
        break;
      case config::KeyType::kStringList:
        EXPECT_NO_THROW(conf.get_strings(key)) << key;
        break;
    }
  }
}

// The framework knows no app: its schema has only its own sections.
// locks.postgres.dsn may be written as a table of its own or as a dotted key; a key under a
// table that is not declared is refused with its full name.
TEST(Config, ATableInsideASectionHoldsDottedKeys) {
  const std::string table = write_temp(
      "[locks]\nbackend = \"postgres\"\n[locks.postgres]\ndsn = \"host=db1\"\npool = 4\n");
  const Config a = Config::load(table, {});
  EXPECT_EQ(a.get_string("locks.postgres.dsn"), "host=db1");
  EXPECT_EQ(a.get_int("locks.postgres.pool"), 4);
  const std::string dotted = write_temp("[locks]\npostgres.dsn = \"host=db2\"\n");
  EXPECT_EQ(Config::load(dotted, {}).get_string("locks.postgres.dsn"), "host=db2");
  EXPECT_EQ(
      Config::load(std::nullopt, {"locks.postgres.dsn=host=db3"}).get_string("locks.postgres.dsn"),
      "host=db3");
  const std::string typo = write_temp("[locks.postgres]\ndns = \"host=db1\"\n");
  try {
    Config::load(typo, {});
    ADD_FAILURE() << "a typo under [locks.postgres] was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("locks.postgres.dns"), std::string::npos) << e.what();
  }
  for (const auto& f : {table, dotted, typo}) std::remove(f.c_str());
}

TEST(Config, TheFrameworkSchemaNamesNoAppKey) {
  const std::set<std::string> framework_sections{
      "server", "limits", "locks", "data", "session", "offline", "templates", "log", "security"};
  const config::Schema schema = config::Schema::framework();
  for (const auto& spec : schema.keys()) {
    const std::string key(spec.key);
    EXPECT_TRUE(framework_sections.count(key.substr(0, key.find('.')))) << key;
  }
  EXPECT_THROW(Config::defaults().get_strings("bbs.boards"), std::logic_error);
}

TEST(Config, AnAppSectionIsLoadedLikeTheFrameworks) {
  const std::string path = write_temp("[guestbook]\nentries = 20\n[server]\nthreads = 2\n");
  const Config conf = Config::load(guestbook_schema(), path, {"guestbook.title=Visitors"});
  EXPECT_EQ(conf.get_int("guestbook.entries"), 20);
  EXPECT_EQ(conf.get_string("guestbook.title"), "Visitors");
  EXPECT_EQ(conf.get_int("server.threads"), 2);
  EXPECT_THROW(Config::load(guestbook_schema(), std::nullopt, {"guestbook.entries=0"}),
               ConfigError);
  std::remove(path.c_str());
}

TEST(Config, ASectionNoModuleDeclaresIsRefusedByName) {
  const std::string path = write_temp("[guestbok]\nentries = 20\n");
  try {
    Config::load(guestbook_schema(), path, {});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no section [guestbok]"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// kagi-locks and kagi-fsck read a site's conf for the framework's keys only.
TEST(Config, ToolsSkipOtherSectionsButStillCheckTheirOwn) {
  const std::string path = write_temp("[guestbook]\nentries = 20\n[locks]\ndir = \"x\"\n");
  const Config conf = Config::load(config::Schema::framework(), path, {"guestbook.entries=3"},
                                   Config::OtherSections::kSkip);
  EXPECT_EQ(conf.get_string("locks.dir"), "x");
  EXPECT_THROW(Config::load(config::Schema::framework(), path, {"locks.dri=y"},
                            Config::OtherSections::kSkip),
               ConfigError);
  EXPECT_THROW(Config::load(config::Schema::framework(), path, {}), ConfigError);
  std::remove(path.c_str());
}

TEST(Config, SchemaRefusesKeysOutsideTheirSectionAndSectionsDeclaredTwice) {
  config::Schema schema = guestbook_schema();
  EXPECT_THROW(schema.add_section("guestbook", kGuestbookKeys), std::logic_error);
  EXPECT_THROW(schema.add_section("visitors", kGuestbookKeys), std::logic_error);
  EXPECT_THROW(schema.add_section("server", {}), std::logic_error);
  EXPECT_THROW(schema.add_section("a.b", {}), std::logic_error);
}

TEST(Config, FileThenOverridesApplyInOrder) {
  std::string path = write_temp("[server]\nthreads = 8\nhttp = \"a:1\"\n");
  Config conf = Config::load(path, {"server.threads=16", "locks.timeout_ms = 7"});
  EXPECT_EQ(conf.get_int("server.threads"), 16);
  EXPECT_EQ(conf.get_string("server.http"), "a:1");
  EXPECT_EQ(conf.get_int("locks.timeout_ms"), 7);
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
