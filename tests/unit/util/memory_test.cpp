#include <kagi/util/memory.hpp>

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace kagi::util {
namespace {

// A real 1 MiB allocation: used, so the compiler cannot drop the malloc/free pair.
void* allocate_mib() {
  void* block = std::malloc(1u << 20);
  if (block) std::memset(block, 1, 1u << 20);
  asm volatile("" : : "g"(block) : "memory");
  return block;
}

// Sanitizers replace malloc: mallopt() is a no-op there and mallinfo2() reports nothing.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizedMalloc = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizedMalloc = true;
#else
constexpr bool kSanitizedMalloc = false;
#endif
#else
constexpr bool kSanitizedMalloc = false;
#endif

// Free bytes the allocator keeps after a 1 MiB block was used and freed.
size_t kept_after_a_mib() {
  std::free(allocate_mib());
  return mallinfo2().fordblks;
}

TEST(MemoryTest, AFreedRequestSizedBlockIsKeptForTheNextRequest) {
  if (kSanitizedMalloc) GTEST_SKIP() << "the sanitizer's allocator ignores mallopt()";
  // Small thresholds (glibc-like behaviour): the freed MiB goes back to the kernel.
  ASSERT_TRUE(tune_malloc_for_requests(64u << 10, 64u << 10));
  EXPECT_LT(kept_after_a_mib(), size_t{1} << 20);
  // The server settings: it stays in the heap, ready for the next request.
  ASSERT_TRUE(tune_malloc_for_requests());
  EXPECT_GE(kept_after_a_mib(), size_t{1} << 20);
}

}  // namespace
}  // namespace kagi::util
