// apps/bbs/settings.hpp — what the board's handlers share: its settings (read once when the
// board is mounted), the board named in a request's path, a post found under its board's
// lock, and the one place a post's password is checked (delete and edit).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kagi/app/context.hpp>
#include <kagi/util/secret.hpp>
#include <kagi/view/page_cache.hpp>
#include "bbs/board.hpp"
#include "bbs/input.hpp"
#include "bbs/throttle.hpp"

namespace kagi::apps::bbs {

struct Settings {
  explicit Settings(const util::Secret& app_secret) : secret(app_secret) {}

  std::vector<std::string> boards;
  size_t keep = 1000;
  std::unique_ptr<BoardCache> cache;  // made once bbs.keep is known
  size_t page_size = 20;
  std::unique_ptr<view::PageCache> pages;  // rendered board pages (bbs.page_cache)
  int64_t flood_interval_s = 10;
  InputLimits limits;
  util::Secret secret;  // keys the client tags (the app's server secret)
  // Password checks allowed per minute, per client and per post (bbs.delete_tries_*).
  std::unique_ptr<AttemptLimiter> delete_per_client, delete_per_post;
  // Post passwords being checked in this process now: at most one at a time, so that the
  // checks (tens of ms of CPU each) never hold several of the worker threads a reader needs.
  mutable std::atomic<int> checking{0};
  std::chrono::seconds edit_ttl{600};  // bbs.edit_ttl_s: an editor's offline lock
};

inline constexpr const char* kTimeFormat = "%Y-%m-%d %H:%M UTC";

// The board named in the path, or 404. Only configured boards exist, so a hostile name
// ("../../etc") never reaches the lock layer or the filesystem.
const std::string& find_board(const Settings& s, const Request& req);

// A copy of post `id` of `board`, read under the board's shared lock (released on return),
// or 404.
Post read_post(const Settings& s, Context& ctx, const std::string& board, int64_t id);

// Checks `password` against a post's stored hash, with no lock held: throttled per client and
// per post (429 + Retry-After beyond), one check at a time per process (429), and 403 when it
// does not match or the post has no password. `what` names the action ("delete", "edit").
void check_post_password(const Settings& s, const Request& req, const std::string& board,
                         int64_t id, const std::string& hash, std::string_view password,
                         std::string_view what);

}  // namespace kagi::apps::bbs
