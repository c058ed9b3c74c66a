// util/log.hpp — one-line log records on stderr (the process manager or systemd collects
// them). Each line: "2026-11-23T01:02:03.456Z level pid message". Thread-safe; a line is
// written with one write(2) so lines from several workers never interleave.
#pragma once

#include <string_view>

namespace kagi::util {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

void log(LogLevel level, std::string_view message);
inline void log_info(std::string_view m) { log(LogLevel::kInfo, m); }
inline void log_warn(std::string_view m) { log(LogLevel::kWarn, m); }
inline void log_error(std::string_view m) { log(LogLevel::kError, m); }

// Lines below this level are dropped (default kInfo).
void set_log_level(LogLevel level);

}  // namespace kagi::util
