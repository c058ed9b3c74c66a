#include <kagi/util/log.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include <kagi/util/process.hpp>

namespace kagi::util {
namespace {

std::atomic<LogLevel> g_min_level{LogLevel::kInfo};

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel level) { g_min_level.store(level, std::memory_order_relaxed); }

void log(LogLevel level, std::string_view message) {
  if (level < g_min_level.load(std::memory_order_relaxed)) return;
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  std::string line;
  line.reserve(message.size() + 64);
  line += stamp;
  line += ' ';
  line += level_name(level);
  line += ' ';
  line += std::to_string(current_pid());
  line += ' ';
  // One record per line: a message must not forge further lines.
  for (char c : message) line += (c == '\n' || c == '\r') ? ' ' : c;
  line += '\n';
  // A failed log write has nowhere to be reported; ignore it.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace kagi::util
