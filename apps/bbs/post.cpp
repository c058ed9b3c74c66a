#include "bbs/post.hpp"

#include <kagi/store/record_fields.hpp>

namespace kagi::apps::bbs {
namespace {

// Record format versions: post1 had no edit fields; post2 adds edited_at and version.
constexpr std::string_view kTag1 = "post1";
constexpr std::string_view kTag2 = "post2";

}  // namespace

std::string encode(const Post& post) {
  return store::join_fields({kTag2, std::to_string(post.id), std::to_string(post.time), post.client,
                             post.password_hash, post.name, post.subject, post.body,
                             std::to_string(post.edited_at), std::to_string(post.version)});
}

std::optional<Post> decode(std::string_view record) {
  const bool v2 = record.starts_with(kTag2);
  auto fields = store::split_fields(record, v2 ? 10 : 8);
  if (!fields || (*fields)[0] != (v2 ? kTag2 : kTag1)) return std::nullopt;
  auto& f = *fields;
  auto id = store::parse_int(f[1]);
  auto time = store::parse_int(f[2]);
  if (!id || !time || *id <= 0) return std::nullopt;
  Post post{.id = *id,
            .time = *time,
            .client = std::move(f[3]),
            .password_hash = std::move(f[4]),
            .name = std::move(f[5]),
            .subject = std::move(f[6]),
            .body = std::move(f[7])};
  if (v2) {
    auto edited_at = store::parse_int(f[8]);
    auto version = store::parse_int(f[9]);
    if (!edited_at || !version || *edited_at < 0 || *version < 1) return std::nullopt;
    post.edited_at = *edited_at;
    post.version = *version;
  }
  return post;
}

}  // namespace kagi::apps::bbs
