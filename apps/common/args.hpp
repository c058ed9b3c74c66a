// apps/common/args.hpp — small helpers the sample apps' handlers share: the clock, dates on
// pages, and strict integer arguments (a malformed one is a 400, never a silent default).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kagi::apps {

// Seconds since the epoch.
int64_t unix_now();

// `unix_s` formatted in UTC with strftime `format` ("%Y-%m-%d %H:%M UTC").
std::string format_utc(int64_t unix_s, const char* format);

// `text` as an integer from `min` to `max`; `fallback` when empty. Anything else throws
// HttpError 400 saying what was expected.
int64_t int_arg(std::string_view text, int64_t fallback, int64_t min, int64_t max);

}  // namespace kagi::apps
