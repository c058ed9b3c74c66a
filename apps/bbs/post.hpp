// apps/bbs/post.hpp — a board post and its on-disk form (one record of the board's log).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kagi::apps::bbs {

struct Post {
  int64_t id = 0;             // per board, from 1, increasing
  int64_t time = 0;           // unix seconds
  std::string client;         // hash of the poster's address (flood and duplicate checks)
  std::string password_hash;  // salted hash of the post's password (edit and delete), or ""
  std::string name;
  std::string subject;
  std::string body;
  int64_t edited_at = 0;  // unix seconds of the last edit; 0: never edited
  int64_t version = 1;    // 1 when posted, one more at each edit (an editor saves only over
                          // the version it loaded)
};

// One line-free record: fields joined by tabs, with '\\', tab and newline escaped.
std::string encode(const Post& post);
// nullopt for a record that is not a post (a foreign or damaged record is skipped, not
// misread). Reads both formats: "post1" (before edits existed) and "post2".
std::optional<Post> decode(std::string_view record);

}  // namespace kagi::apps::bbs
