#include "bbs/settings.hpp"

#include <algorithm>

#include <kagi/app/http_error.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/util/password.hpp>

namespace kagi::apps::bbs {

const std::string& find_board(const Settings& s, const Request& req) {
  std::string_view name = req.param("board");
  for (const auto& board : s.boards) {
    if (board == name) return board;
  }
  throw HttpError(404, "There is no board called '" + std::string(name) + "'.");
}

Post read_post(const Settings& s, Context& ctx, const std::string& board, int64_t id) {
  // LOCK shared and READ; the post is copied because the board's items are valid only while
  // its lock is held.
  auto guard = ctx.locks.shared(board_lock_name(board));
  BoardState state = read_board(*s.cache, ctx.data, guard, board);
  auto it = std::find_if(state.items.begin(), state.items.end(),
                         [&](const Post& p) { return p.id == id; });
  if (it == state.items.end()) throw HttpError(404, "There is no post " + std::to_string(id) + ".");
  return *it;
}  // unlocked here

void check_post_password(const Settings& s, const Request& req, const std::string& board,
                         int64_t id, const std::string& hash, std::string_view password,
                         std::string_view what) {
  if (hash.empty()) {
    throw HttpError(
        403, "This post was made without a password, so nobody can " + std::string(what) + " it.");
  }
  // Each guess costs the server a hash, so guesses are counted per client (CPU a single
  // address can burn) and per post (guesses at one password from everywhere) before any
  // hashing; over the limit → 429 + Retry-After.
  struct Checking {  // the one check of this process, given back however it ends
    std::atomic<int>& n;
    ~Checking() { n.fetch_sub(1); }
  } checking{s.checking};
  if (s.checking.fetch_add(1) != 0) {
    throw HttpError(429,
                    "Another password is being checked right now. Please try again in a "
                    "second.")
        .with_header("Retry-After", "1");
  }
  const int64_t now = steady_now_s();
  int64_t wait = s.delete_per_client->try_attempt(client_tag(req.client_address, s.secret), now);
  if (!wait) wait = s.delete_per_post->try_attempt(board + "/" + std::to_string(id), now);
  if (wait) {
    throw HttpError(429, "Too many password attempts. Please wait " + std::to_string(wait) +
                             " seconds and try again.")
        .with_header("Retry-After", std::to_string(wait));
  }
  if (!util::verify_password(password, hash)) {
    throw HttpError(403, "The password does not match.");
  }
}

}  // namespace kagi::apps::bbs
