#include <kagi/util/memory.hpp>

#include <malloc.h>

#include <climits>

namespace kagi::util {

bool tune_malloc_for_requests(size_t mmap_threshold, size_t trim_threshold) {
  // mallopt takes an int; anything bigger is clamped rather than wrapped.
  auto as_int = [](size_t v) { return static_cast<int>(v > INT_MAX ? INT_MAX : v); };
  // Setting either threshold turns off glibc's own adjustment of both, so set both.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, as_int(mmap_threshold)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, as_int(trim_threshold)) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace kagi::util
