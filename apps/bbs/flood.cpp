#include "bbs/flood.hpp"

#include <algorithm>

#include "common/tag_buckets.hpp"

namespace kagi::apps::bbs {

std::string flood_lock_name(std::string_view client_tag) {
  return tag_bucket_lock("bbs/flood", client_tag);
}

std::string flood_path(std::string_view client_tag) {
  return tag_bucket_path("bbs/flood", client_tag);
}

int64_t flood_wait_s(const store::DataStore& data, const lock::Guard& guard,
                     std::string_view client_tag, int64_t now, int64_t interval_s) {
  std::string text = data.read(guard, flood_path(client_tag)).value();
  int64_t wait = 0;
  for_each_tag_line(text, [&](std::string_view tag, int64_t time) {
    if (tag == client_tag) wait = std::max(wait, time + interval_s - now);
  });
  return wait;
}

void flood_record(store::DataStore& data, const lock::ExclusiveGuard& guard,
                  std::string_view client_tag, int64_t now, int64_t interval_s) {
  std::string path = flood_path(client_tag);
  std::string old = data.read(guard, path).value();
  std::string kept;
  for_each_tag_line(old, [&](std::string_view tag, int64_t time) {
    if (tag != client_tag && time + interval_s > now) append_tag_line(kept, tag, time);
  });
  append_tag_line(kept, client_tag, now);
  data.commit(guard, path, kept).check();
}

}  // namespace kagi::apps::bbs
