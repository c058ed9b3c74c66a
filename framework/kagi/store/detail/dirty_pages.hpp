// store/detail/dirty_pages.hpp — how much data the kernel still has to write out, from
// /proc/meminfo: what decides whether a group commit round may use one syncfs (a syncfs writes
// every dirty page of its filesystem, not only kagi's).
#pragma once

#include <cstdint>
#include <string_view>

namespace kagi::store::detail {

// Dirty + Writeback of a /proc/meminfo text, in bytes; -EINVAL if either line is missing or
// malformed.
int64_t parse_meminfo_dirty(std::string_view meminfo);

// The same read from /proc/meminfo now; -errno if it cannot be read.
int64_t read_meminfo_dirty();

}  // namespace kagi::store::detail
