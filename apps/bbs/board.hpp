// apps/bbs/board.hpp — a board's posts on disk: one append-only log per board
// ("bbs/boards/<name>.log" under data.dir), protected by the lock "bbs/board/<name>".
//
// A post is one appended record (no rewrite of the board per post). Deleting a post and
// dropping posts beyond bbs.keep rewrite the log atomically; the rewritten log starts with a
// record holding the highest id ever given, so ids are never reused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bbs/post.hpp"
#include "lock/guard.hpp"
#include "store/data_dir.hpp"

namespace kagi::apps::bbs {

std::string board_lock_name(std::string_view board);
std::string board_log_path(std::string_view board);

struct BoardState {
  std::vector<Post> posts;  // oldest first; at most `keep`
  int64_t last_id = 0;      // highest id ever given on this board
  size_t records = 0;       // records in the log (decides when to compact)
};

// Reads the board under `guard` (shared or exclusive). Throws store::StoreError on I/O errors.
BoardState read_board(const store::DataDir& data, const lock::Guard& guard, std::string_view board,
                      size_t keep);

// Appends `post` (its id must be state.last_id + 1). When the log holds more than twice
// `keep` records, rewrites it with the newest `keep` posts instead.
void add_post(store::DataDir& data, const lock::ExclusiveGuard& guard, std::string_view board,
              const BoardState& state, const Post& post, size_t keep);

// Rewrites the board with `posts` (e.g. after a delete), keeping last_id.
void replace_posts(store::DataDir& data, const lock::ExclusiveGuard& guard, std::string_view board,
                   const std::vector<Post>& posts, int64_t last_id);

}  // namespace kagi::apps::bbs
