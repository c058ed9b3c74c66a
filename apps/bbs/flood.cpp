#include "bbs/flood.hpp"

#include <charconv>
#include <cstdio>

namespace kagi::apps::bbs {
namespace {

int bucket_of(std::string_view client_tag) {
  unsigned value = 0;
  std::from_chars(client_tag.data(), client_tag.data() + std::min<size_t>(4, client_tag.size()),
                  value, 16);
  return static_cast<int>(value % kFloodBuckets);
}

std::string bucket_text(std::string_view client_tag) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d", bucket_of(client_tag));
  return buf;
}

// Calls fn(tag, time) for each "tag time" line of a bucket file.
template <typename Fn>
void for_each_entry(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    size_t space = line.find(' ');
    if (space != std::string_view::npos) {
      int64_t time = 0;
      std::string_view t = line.substr(space + 1);
      if (std::from_chars(t.data(), t.data() + t.size(), time).ec == std::errc()) {
        fn(line.substr(0, space), time);
      }
    }
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

std::string flood_lock_name(std::string_view client_tag) {
  return "bbs/flood/" + bucket_text(client_tag);
}

std::string flood_path(std::string_view client_tag) {
  return "bbs/flood/" + bucket_text(client_tag) + ".txt";
}

int64_t flood_wait_s(const store::DataDir& data, const lock::Guard& guard,
                     std::string_view client_tag, int64_t now, int64_t interval_s) {
  std::string text = data.read(guard, flood_path(client_tag)).value();
  int64_t wait = 0;
  for_each_entry(text, [&](std::string_view tag, int64_t time) {
    if (tag == client_tag) wait = std::max(wait, time + interval_s - now);
  });
  return wait;
}

void flood_record(store::DataDir& data, const lock::ExclusiveGuard& guard,
                  std::string_view client_tag, int64_t now, int64_t interval_s) {
  std::string path = flood_path(client_tag);
  std::string old = data.read(guard, path).value();
  std::string kept;
  for_each_entry(old, [&](std::string_view tag, int64_t time) {
    if (tag != client_tag && time + interval_s > now) {
      kept.append(tag).append(" ").append(std::to_string(time)).append("\n");
    }
  });
  kept.append(client_tag).append(" ").append(std::to_string(now)).append("\n");
  data.commit(guard, path, kept).check();
}

}  // namespace kagi::apps::bbs
