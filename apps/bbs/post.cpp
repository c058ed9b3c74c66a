#include "bbs/post.hpp"

#include <kagi/store/record_fields.hpp>

namespace kagi::apps::bbs {
namespace {

constexpr std::string_view kTag = "post1";  // record format version

}  // namespace

std::string encode(const Post& post) {
  return store::join_fields({kTag, std::to_string(post.id), std::to_string(post.time), post.client,
                             post.password_hash, post.name, post.subject, post.body});
}

std::optional<Post> decode(std::string_view record) {
  auto fields = store::split_fields(record, 8);
  if (!fields || (*fields)[0] != kTag) return std::nullopt;
  auto id = store::parse_int((*fields)[1]);
  auto time = store::parse_int((*fields)[2]);
  if (!id || !time || *id <= 0) return std::nullopt;
  auto& f = *fields;
  return Post{.id = *id,
              .time = *time,
              .client = std::move(f[3]),
              .password_hash = std::move(f[4]),
              .name = std::move(f[5]),
              .subject = std::move(f[6]),
              .body = std::move(f[7])};
}

}  // namespace kagi::apps::bbs
