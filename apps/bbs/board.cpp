#include "bbs/board.hpp"

#include <algorithm>
#include <charconv>

namespace kagi::apps::bbs {
namespace {

constexpr std::string_view kMetaTag = "meta1\t";

std::string meta_record(int64_t last_id) { return std::string(kMetaTag) + std::to_string(last_id); }

}  // namespace

std::string board_lock_name(std::string_view board) { return "bbs/board/" + std::string(board); }
std::string board_log_path(std::string_view board) {
  return "bbs/boards/" + std::string(board) + ".log";
}

BoardState read_board(const store::DataDir& data, const lock::Guard& guard, std::string_view board,
                      size_t keep) {
  BoardState state;
  std::vector<std::string> records = data.read_log(guard, board_log_path(board)).value();
  state.records = records.size();
  for (const auto& record : records) {
    if (record.starts_with(kMetaTag)) {
      int64_t id = 0;
      std::string_view v = std::string_view(record).substr(kMetaTag.size());
      std::from_chars(v.data(), v.data() + v.size(), id);
      state.last_id = std::max(state.last_id, id);
    } else if (auto post = decode(record)) {
      state.last_id = std::max(state.last_id, post->id);
      state.posts.push_back(std::move(*post));
    }
  }
  if (state.posts.size() > keep) {
    state.posts.erase(state.posts.begin(),
                      state.posts.begin() + static_cast<long>(state.posts.size() - keep));
  }
  return state;
}

void add_post(store::DataDir& data, const lock::ExclusiveGuard& guard, std::string_view board,
              const BoardState& state, const Post& post, size_t keep) {
  if (state.records + 1 <= 2 * keep) {
    data.append(guard, board_log_path(board), encode(post)).check();
    return;
  }
  // Compact: the newest keep - 1 old posts plus the new one.
  std::vector<Post> posts(
      state.posts.end() - static_cast<long>(std::min(state.posts.size(), keep - 1)),
      state.posts.end());
  posts.push_back(post);
  replace_posts(data, guard, board, posts, post.id);
}

void replace_posts(store::DataDir& data, const lock::ExclusiveGuard& guard, std::string_view board,
                   const std::vector<Post>& posts, int64_t last_id) {
  std::vector<std::string> records;
  records.reserve(posts.size() + 1);
  records.push_back(meta_record(last_id));
  for (const auto& post : posts) records.push_back(encode(post));
  data.rewrite_log(guard, board_log_path(board), records).check();
}

}  // namespace kagi::apps::bbs
