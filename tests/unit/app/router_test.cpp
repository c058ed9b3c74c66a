#include <kagi/app/router.hpp>

#include <gtest/gtest.h>

namespace kagi {
namespace {

Handler tagged(std::string tag) {
  return [tag](Request&, Context&) { return Response::text(tag); };
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.get("/", tagged("home"));
    router_.get("/bbs/", tagged("boards"));
    router_.get("/bbs/{board}/", tagged("board"));
    router_.post("/bbs/{board}/post", tagged("post"));
    router_.get("/bbs/{board}/posts.json", tagged("json"));
  }
  Router router_;
};

TEST_F(RouterTest, LiteralAndPlaceholderSegments) {
  auto m = router_.match("GET", "/bbs/general/");
  ASSERT_EQ(m.kind, Router::Match::kFound);
  EXPECT_EQ(m.params.value_or("board", ""), "general");
  EXPECT_EQ(router_.match("GET", "/").kind, Router::Match::kFound);
  EXPECT_EQ(router_.match("GET", "/bbs/").params.size(), 0u);
}

TEST_F(RouterTest, TrailingSlashIsSignificant) {
  EXPECT_EQ(router_.match("GET", "/bbs/general").kind, Router::Match::kNotFound);
  EXPECT_EQ(router_.match("GET", "/bbs").kind, Router::Match::kNotFound);
}

TEST_F(RouterTest, PlaceholderNeverMatchesAnEmptySegment) {
  EXPECT_EQ(router_.match("GET", "/bbs//").kind, Router::Match::kNotFound);
}

TEST_F(RouterTest, WrongMethodListsAllowedMethods) {
  auto m = router_.match("GET", "/bbs/general/post");
  EXPECT_EQ(m.kind, Router::Match::kMethodNotAllowed);
  EXPECT_EQ(m.allow, "POST");
  m = router_.match("DELETE", "/bbs/general/");
  EXPECT_EQ(m.kind, Router::Match::kMethodNotAllowed);
  EXPECT_EQ(m.allow, "GET, HEAD");
}

TEST_F(RouterTest, HeadIsServedByGet) {
  EXPECT_EQ(router_.match("HEAD", "/bbs/general/").kind, Router::Match::kFound);
}

TEST_F(RouterTest, UnknownPathsAreNotFound) {
  EXPECT_EQ(router_.match("GET", "/nope").kind, Router::Match::kNotFound);
  EXPECT_EQ(router_.match("GET", "/bbs/general/extra/deep").kind, Router::Match::kNotFound);
  EXPECT_EQ(router_.match("GET", "").kind, Router::Match::kNotFound);
}

TEST_F(RouterTest, FirstRegisteredRouteWins) {
  router_.get("/bbs/{other}/", tagged("shadowed"));
  auto m = router_.match("GET", "/bbs/x/");
  ASSERT_EQ(m.kind, Router::Match::kFound);
  EXPECT_TRUE(m.params.has("board"));
}

}  // namespace
}  // namespace kagi
