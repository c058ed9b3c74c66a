#include "common/args.hpp"

#include <chrono>
#include <ctime>

#include <kagi/app/http_error.hpp>
#include <kagi/store/record_fields.hpp>

namespace kagi::apps {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_utc(int64_t unix_s, const char* format) {
  std::time_t t = unix_s;
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, format, &utc);
  return std::string(buf, n);
}

int64_t int_arg(std::string_view text, int64_t fallback, int64_t min, int64_t max) {
  if (text.empty()) return fallback;
  auto v = store::parse_int(text);
  if (!v || *v < min || *v > max) {
    throw HttpError(400, "expected a whole number from " + std::to_string(min) + " to " +
                             std::to_string(max) + ", got '" + std::string(text) + "'");
  }
  return *v;
}

}  // namespace kagi::apps
