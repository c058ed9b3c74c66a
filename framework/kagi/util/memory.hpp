// util/memory.hpp — process-wide memory settings for a long-running server.
#pragma once

#include <cstddef>

namespace kagi::util {

// Serving a request allocates and frees the same few hundred KiB again and again (a board's
// log read whole, a rendered page). glibc's defaults give blocks above 128 KiB back to the
// kernel at once (mmap/munmap) and trim per-thread arenas as soon as their top is free, so
// every request pays page faults for memory the next one wants again: on the BBS post path
// that was a third of all CPU time. This keeps blocks up to `mmap_threshold` in the arenas
// and lets each arena keep up to `trim_threshold` free at its top. Call once at start, before
// threads; returns false if glibc refused a setting.
bool tune_malloc_for_requests(size_t mmap_threshold = 4u << 20, size_t trim_threshold = 32u << 20);

}  // namespace kagi::util
