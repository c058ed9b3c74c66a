#include <kagi/http/response.hpp>

#include <gtest/gtest.h>

namespace kagi::http {
namespace {

TEST(HasLineBreak, FindsACarriageReturnOrALineFeedAnywhere) {
  EXPECT_FALSE(has_line_break(""));
  EXPECT_FALSE(has_line_break("text/html; charset=utf-8\t "));
  EXPECT_TRUE(has_line_break("a\r"));
  EXPECT_TRUE(has_line_break("\nb"));
  EXPECT_TRUE(has_line_break(std::string(200, 'x') + "\r\n"));
  EXPECT_TRUE(has_line_break(std::string("a\0\n", 3)));
}

Cookie cookie(std::string value) {
  Cookie c;
  c.name = "c";
  c.value = std::move(value);
  return c;
}

TEST(AppendFields, WritesFieldsThenCookiesInOrder) {
  Response res = Response::text("body");
  res.headers.add("X-One", "1");
  res.headers.add("X-One", "again");
  res.cookies.push_back(cookie("v"));
  std::string head = "HTTP/1.1 200 OK\r\n";
  append_fields(head, res);
  EXPECT_EQ(head,
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "X-One: 1\r\n"
            "X-One: again\r\n"
            "Set-Cookie: c=v; Path=/; HttpOnly; SameSite=Lax\r\n");
}

TEST(AppendFields, LeavesOutWhatWouldSplitTheHeadAndWhatTheFrontEndWrites) {
  Response res;
  res.headers.add("X-Evil", "a\r\nSet-Cookie: owned=1");
  res.headers.add("X-Evil\n", "b");
  res.headers.add("", "no name");
  res.headers.add("content-LENGTH", "99");
  res.headers.add("Connection", "upgrade");
  res.headers.add("X-Kept", "yes");
  res.cookies.push_back(cookie("v\r\nX-Injected: 1"));
  std::string head;
  append_fields(head, res, "Content-Length", "Connection");
  EXPECT_EQ(head, "X-Kept: yes\r\n");
  // Without names to skip, only the unsafe fields are left out.
  head.clear();
  append_fields(head, res);
  EXPECT_EQ(head, "content-LENGTH: 99\r\nConnection: upgrade\r\nX-Kept: yes\r\n");
}

}  // namespace
}  // namespace kagi::http
