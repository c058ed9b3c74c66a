// Views (framework/kagi/view/views.hpp): a site's templates first, a fallback folder behind.
#include <kagi/view/views.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kagi::view {
namespace {

namespace fs = std::filesystem;

class ViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("kagi-views-" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string write(const std::string& rel, const std::string& body, bool pragma = true) {
    const fs::path path = root_ / rel;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << (pragma ? "{{%AUTOESCAPE context=\"HTML\"}}\n" : "") << body;
    return path.string();
  }
  std::string dir(const std::string& name) const { return (root_ / name).string(); }

  fs::path root_;
};

TEST_F(ViewsTest, TheSiteFolderWinsAndTheFallbackFillsTheGaps) {
  write("site/page.html", "page {{X}}");
  write("site/errors/error.html", "site error");
  write("kagi/errors/error.html", "kagi error");
  write("kagi/errors/404.html", "kagi 404");
  Views views(dir("site"), dir("kagi"));
  Dict dict;
  dict.set("X", "<b>");
  EXPECT_EQ(views.render("page.html", dict), "page &lt;b&gt;");
  EXPECT_EQ(views.render("errors/error.html", dict), "site error");
  EXPECT_EQ(views.render("errors/404.html", dict), "kagi 404");
  EXPECT_FALSE(views.has("errors/500.html"));
}

TEST_F(ViewsTest, WithoutAFallbackOnlyTheSiteFolderIsLoaded) {
  write("site/page.html", "page");
  write("kagi/errors/404.html", "kagi 404");
  Views views(dir("site"));
  EXPECT_TRUE(views.has("page.html"));
  EXPECT_FALSE(views.has("errors/404.html"));
}

TEST_F(ViewsTest, AFallbackTemplateWithoutThePragmaIsRefused) {
  write("site/page.html", "page");
  const std::string bad = write("kagi/errors/404.html", "raw {{X}}", /*pragma=*/false);
  try {
    Views views(dir("site"), dir("kagi"));
    FAIL() << "loaded a template without AUTOESCAPE";
  } catch (const ViewError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(ViewsTest, AMissingFolderIsAClearError) {
  write("site/page.html", "page");
  EXPECT_THROW(Views(dir("nowhere")), ViewError);
  try {
    Views views(dir("site"), dir("nowhere"));
    FAIL() << "no error";
  } catch (const ViewError& e) {
    EXPECT_NE(std::string(e.what()).find("templates.fallback_dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kagi::view
