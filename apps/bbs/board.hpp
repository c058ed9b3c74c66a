// apps/bbs/board.hpp — a board's posts on disk: one numbered log per board
// ("bbs/boards/<name>.log" under data.dir; common/numbered_log.hpp), protected by the lock
// "bbs/board/<name>".
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <kagi/store/numbered_log.hpp>
#include "bbs/post.hpp"

namespace kagi::apps::bbs {

inline std::string board_lock_name(std::string_view board) {
  return "bbs/board/" + std::string(board);
}
inline std::string board_log_path(std::string_view board) {
  return "bbs/boards/" + std::string(board) + ".log";
}

// items: the posts, oldest first, at most bbs.keep, valid while the board's lock is held;
// last_id: the highest id ever given.
using BoardState = store::NumberedLog<Post>;
// This process's decoded boards (one per app: bbs.keep posts each).
using BoardCache = store::NumberedLogCache<Post>;

inline std::unique_ptr<BoardCache> make_board_cache(size_t keep) {
  return std::make_unique<BoardCache>(keep, &decode);
}

// Reads the board under `guard` (shared or exclusive). Throws store::StoreError on I/O errors.
inline BoardState read_board(BoardCache& cache, const store::DataStore& data,
                             const lock::Guard& guard, std::string_view board) {
  return cache.read(data, guard, board_log_path(board));
}

// Appends `post` (its id must be state.last_id + 1); compacts beyond four times `keep`.
inline void add_post(store::DataStore& data, const lock::ExclusiveGuard& guard,
                     std::string_view board, const BoardState& state, const Post& post,
                     size_t keep) {
  store::add_numbered(data, guard, board_log_path(board), state, post, keep);
}

// Rewrites the board with `posts` (after a delete), keeping last_id.
inline void replace_posts(store::DataStore& data, const lock::ExclusiveGuard& guard,
                          std::string_view board, std::span<const Post> posts, int64_t last_id) {
  store::replace_numbered(data, guard, board_log_path(board), posts, last_id);
}

}  // namespace kagi::apps::bbs
