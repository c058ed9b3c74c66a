#include "bbs/text.hpp"

#include <gtest/gtest.h>

namespace kagi::apps::bbs {
namespace {

TEST(Text, CountsCodePoints) {
  EXPECT_EQ(char_count(""), 0u);
  EXPECT_EQ(char_count("abc"), 3u);
  EXPECT_EQ(char_count("h\xc3\xa9"), 2u);
  EXPECT_EQ(char_count("\xe9\x8d\xb5\xf0\x9f\x94\x91"), 2u);
}

TEST(Text, EscapesEverythingDangerous) {
  EXPECT_EQ(html_escape("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;");
  std::string out = body_html("<script>alert(1)</script>");
  EXPECT_EQ(out.find("<script"), std::string::npos);
}

TEST(Text, LinksHttpUrlsOnly) {
  EXPECT_EQ(body_html("see https://example.org/a?b=1&c=2."),
            "see <a href=\"https://example.org/a?b=1&amp;c=2\" rel=\"nofollow ugc noopener\">"
            "https://example.org/a?b=1&amp;c=2</a>.");
  EXPECT_EQ(body_html("javascript:alert(1)"), "javascript:alert(1)");
  EXPECT_EQ(body_html("xhttp://no.link"), "xhttp://no.link");
  EXPECT_EQ(body_html("http://"), "http://");
  EXPECT_EQ(body_html("(http://a.b)"),
            "(<a href=\"http://a.b\" rel=\"nofollow ugc noopener\">http://a.b</a>)");
}

TEST(Text, AUrlCannotBreakOutOfItsAttribute) {
  std::string out = body_html("http://x.org/\"onmouseover=alert(1)");
  EXPECT_EQ(out.find("\"onmouseover"), std::string::npos) << out;
  out = body_html("http://x.org/'><script>");
  EXPECT_EQ(out.find("<script"), std::string::npos) << out;
  EXPECT_EQ(out.find("'>"), std::string::npos) << out;
}

TEST(Text, KeepsLineBreaks) { EXPECT_EQ(body_html("a\nb"), "a\nb"); }

}  // namespace
}  // namespace kagi::apps::bbs
