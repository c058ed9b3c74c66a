// The demo site's conf: every module's section (apps/demo/site.cpp) against conf/kagi.toml,
// the reference file, and what --help-conf prints.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <kagi/config/config.hpp>
#include <string>

#include "demo/site.hpp"

namespace kagi {
namespace {

config::Schema demo_schema() { return schema_for(apps::demo_modules()); }

TEST(DemoSiteConf, TheAppsDeclareTheirOwnSections) {
  const config::Schema schema = demo_schema();
  for (const char* section : {"bbs", "chat", "admin", "test"}) {
    EXPECT_TRUE(schema.has_section(section)) << section;
    EXPECT_FALSE(config::Schema::framework().has_section(section)) << section;
  }
  const Config conf = Config::defaults(demo_schema());
  EXPECT_EQ(conf.get_strings("bbs.boards"), std::vector<std::string>{"general"});
  EXPECT_EQ(conf.get_strings("admin.allow"), (std::vector<std::string>{"127.0.0.1", "::1"}));
  EXPECT_FALSE(conf.get_bool("test.routes"));
}

TEST(DemoSiteConf, ShippedFileLoadsAndDocumentsEveryKeyWithItsDefault) {
  const std::string path = std::string(KAGI_SOURCE_DIR) + "/conf/kagi.toml";
  const Config shipped = Config::load(demo_schema(), path, {});
  // The shipped file states the defaults: loading it changes nothing.
  EXPECT_EQ(shipped.dump(), Config::defaults(demo_schema()).dump());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const config::Schema schema = demo_schema();
  for (const auto& spec : schema.keys()) {
    const std::string key(spec.key);
    const std::string name = key.substr(key.find('.') + 1);
    EXPECT_NE(text.find("\n" + name + " = "), std::string::npos) << key << " is not documented";
  }
}

TEST(DemoSiteConf, HelpConfListsEveryKeyUnderItsSection) {
  const config::Schema schema = demo_schema();
  const std::string help = schema.describe();
  for (const auto& spec : schema.keys()) {
    const std::string key(spec.key);
    const std::string section = "[" + key.substr(0, key.find('.')) + "]";
    const size_t at_section = help.find(section);
    ASSERT_NE(at_section, std::string::npos) << section;
    EXPECT_NE(help.find("\n" + key.substr(key.find('.') + 1) + " = ", at_section),
              std::string::npos)
        << key;
  }
  EXPECT_NE(help.find("boards = [\"general\"]"), std::string::npos) << help;
  EXPECT_NE(help.find("keep = 1000  # integer 1..10000000: posts kept per board"),
            std::string::npos)
      << help;
}

// --help-conf is a conf file of the defaults: loading it changes nothing.
TEST(DemoSiteConf, HelpConfIsALoadableFileOfTheDefaults) {
  const std::string path = ::testing::TempDir() + "/help-conf.toml";
  std::ofstream(path) << demo_schema().describe();
  EXPECT_EQ(Config::load(demo_schema(), path, {}).dump(), Config::defaults(demo_schema()).dump());
}

TEST(DemoSiteConf, AnAppKeyTypoIsRefusedWithItsSection) {
  try {
    Config::load(demo_schema(), std::nullopt, {"bbs.bords=a"});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'bbs.bords' in [bbs]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kagi
