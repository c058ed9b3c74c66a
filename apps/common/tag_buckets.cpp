#include "common/tag_buckets.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace kagi::apps {

std::string tag_bucket(std::string_view tag) {
  unsigned value = 0;
  std::from_chars(tag.data(), tag.data() + std::min<size_t>(4, tag.size()), value, 16);
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02u", value % kTagBuckets);
  return buf;
}

std::string tag_bucket_lock(std::string_view prefix, std::string_view tag) {
  return std::string(prefix) + "/" + tag_bucket(tag);
}

std::string tag_bucket_path(std::string_view prefix, std::string_view tag) {
  return tag_bucket_lock(prefix, tag) + ".txt";
}

void for_each_tag_line(std::string_view text,
                       const std::function<void(std::string_view tag, int64_t number)>& fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0) continue;
    const std::string_view digits = line.substr(space + 1);
    int64_t number = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (ec != std::errc() || end != digits.data() + digits.size()) continue;
    fn(line.substr(0, space), number);
  }
}

void append_tag_line(std::string& out, std::string_view tag, int64_t number) {
  out.append(tag).append(" ").append(std::to_string(number)).append("\n");
}

}  // namespace kagi::apps
