// A kept connection's next request is read without touching the heap: the reader reuses the
// buffers of the request before (params, their C strings, body, input). Counted by replacing
// the global operator new in this test binary.
#include <kagi/fcgi/protocol.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace kagi::fcgi {
namespace {

std::string header(uint8_t type, uint16_t id, size_t length) {
  return {1,
          static_cast<char>(type),
          static_cast<char>(id >> 8),
          static_cast<char>(id & 0xff),
          static_cast<char>(length >> 8),
          static_cast<char>(length & 0xff),
          0,
          0};
}
std::string pair(const std::string& name, const std::string& value) {
  // Both lengths under 128: one byte each.
  return std::string(1, static_cast<char>(name.size())) +
         std::string(1, static_cast<char>(value.size())) + name + value;
}
// A request as nginx sends one on a kept connection: a dozen params, some longer than a
// string keeps inline, and a form body.
std::string request(uint16_t id) {
  std::string params;
  for (const char* name : {"REQUEST_METHOD", "REQUEST_URI", "QUERY_STRING", "CONTENT_TYPE",
                           "CONTENT_LENGTH", "SCRIPT_NAME", "REMOTE_ADDR", "SERVER_PROTOCOL",
                           "HTTP_HOST", "HTTP_USER_AGENT", "HTTP_COOKIE", "HTTP_ACCEPT"}) {
    params += pair(name, std::string(40, 'v'));
  }
  const std::string body = "name=a&subject=b&body=" + std::string(100, 'x');
  std::string begin = header(1, id, 8) + std::string("\0\1\1\0\0\0\0\0", 8);
  return begin + header(4, id, params.size()) + params + header(4, id, 0) +
         header(5, id, body.size()) + body + header(5, id, 0);
}

TEST(RequestReaderAllocations, TheNextRequestOnAKeptConnectionAllocatesNothing) {
  RequestReader reader;
  const std::string first = request(1), second = request(1);
  reader.append(first.data(), first.size());
  ASSERT_EQ(reader.advance(), RequestReader::Status::kComplete);
  ASSERT_EQ(reader.params().size(), 12u);
  reader.next();

  const long before = g_allocations.load();
  reader.append(second.data(), second.size());
  const RequestReader::Status status = reader.advance();
  const size_t params = reader.params().size();
  const long allocations = g_allocations.load() - before;
  ASSERT_EQ(status, RequestReader::Status::kComplete);
  EXPECT_EQ(params, 12u);
  EXPECT_STREQ(reader.envp()[0], ("REQUEST_METHOD=" + std::string(40, 'v')).c_str());
  EXPECT_EQ(allocations, 0) << "heap allocations while reading the second request";
}

}  // namespace
}  // namespace kagi::fcgi
