// The bulletin board: a tutorial in correct locking for classic CGI boards.
//
// Every handler follows the same order:
//
//   1. check the input            (no lock: it needs no shared state)
//   2. LOCK what the request will read and change  (bounded wait: 503 when busy)
//      — and nothing slow while holding it: a password hash runs before or between locks
//   3. READ it, under the lock
//   4. MODIFY in memory
//   5. WRITE it back: an atomic, fenced append or replace
//   6. unlock                     (the guards leave scope)
//
// The pitfalls of hand-rolled CGI locking that this order avoids are named where they bite.
#include "bbs/bbs.hpp"

#include <atomic>
#include <memory>

#include <kagi/app/http_error.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/util/json.hpp>
#include <kagi/util/password.hpp>
#include <kagi/view/page_cache.hpp>
#include <kagi/view/views.hpp>
#include "bbs/board.hpp"
#include "bbs/edit.hpp"
#include "bbs/flood.hpp"
#include "bbs/input.hpp"
#include "bbs/settings.hpp"
#include "bbs/text.hpp"
#include "bbs/throttle.hpp"
#include "common/args.hpp"

namespace kagi::apps {
namespace {

using bbs::BoardState;
using bbs::find_board;
using bbs::kTimeFormat;
using bbs::Post;
using bbs::Settings;

// --- pages ------------------------------------------------------------------------------

int64_t board_pages(const Settings& s, const BoardState& state) {
  const auto posts = static_cast<int64_t>(state.items.size());
  const auto size = static_cast<int64_t>(s.page_size);
  return std::max<int64_t>(1, (posts + size - 1) / size);
}

// Fills a board page's values from a state read under the board's lock. `form` refills the
// post form after a validation error. `page` is clamped to the pages there are.
void fill_board(view::Dict& dict, const Settings& s, const std::string& board,
                const BoardState& state, int64_t page, const bbs::PostInput* form,
                std::string_view error) {
  dict.set("BOARD", board);
  dict.set("TOTAL", static_cast<int64_t>(state.items.size()));
  const int64_t pages = board_pages(s, state);
  page = std::min(page, pages);
  dict.set("PAGE", page);
  dict.set("PAGES", pages);
  if (page > 1) dict.add_section("NEWER").set("PAGE", page - 1);
  if (page < pages) dict.add_section("OLDER").set("PAGE", page + 1);
  // Newest first: page 1 ends at the newest post.
  const auto n = static_cast<int64_t>(state.items.size());
  const int64_t first = n - 1 - (page - 1) * static_cast<int64_t>(s.page_size);
  for (int64_t i = first; i >= 0 && i > first - static_cast<int64_t>(s.page_size); --i) {
    const Post& post = state.items[static_cast<size_t>(i)];
    view::Dict row = dict.add_section("POST");
    row.set("ID", post.id);
    row.set("NAME", post.name);
    row.set("SUBJECT", post.subject.empty() ? "(no subject)" : post.subject);
    row.set("TIME", format_utc(post.time, kTimeFormat));
    row.set_trusted_html("BODY_HTML", bbs::body_html(post.body));
    if (post.edited_at)
      row.add_section("EDITED").set("TIME", format_utc(post.edited_at, kTimeFormat));
    if (!post.password_hash.empty()) row.show_section("DELETABLE");
  }
  if (state.items.empty()) dict.show_section("EMPTY");
  if (!error.empty()) dict.add_section("ERROR").set("MESSAGE", error);
  if (form) {
    dict.set("FORM_NAME", form->name == "Anonymous" ? "" : form->name);
    dict.set("FORM_SUBJECT", form->subject);
    dict.set("FORM_BODY", form->body);
  }
}

// The post form again, with what was sent and why it was refused (400).
Response refuse_post(Context& ctx, const Settings& s, const std::string& board,
                     const BoardState& state, const bbs::PostInput& form, std::string_view error) {
  view::Dict dict;
  fill_board(dict, s, board, state, 1, &form, error);
  return ctx.render("bbs/board.html", dict, 400);
}

// GET /bbs/ — every board's count and last post time. Reads all boards, so it takes all their
// locks as ONE set, shared: the set is acquired in canonical order (no deadlock against any
// other request) and the page shows one consistent moment, not boards read at different times.
Response index(const Settings& s, Request&, Context& ctx) {
  // 1. LOCK: guards[i] is board i's lock (a set hands its guards back in the order asked).
  std::vector<std::string> names;
  for (const auto& board : s.boards) names.push_back(bbs::board_lock_name(board));
  std::vector<lock::SharedGuard> guards = ctx.locks.shared_set(names);

  // 2. READ every board under its lock (nothing is modified or written).
  view::Dict dict;
  for (size_t i = 0; i < s.boards.size(); ++i) {
    const std::string& board = s.boards[i];
    BoardState state = bbs::read_board(*s.cache, ctx.data, guards[i], board);
    view::Dict row = dict.add_section("BOARD");
    row.set("NAME", board);
    row.set("COUNT", static_cast<int64_t>(state.items.size()));
    row.set("LAST", state.items.empty() ? "—" : format_utc(state.items.back().time, kTimeFormat));
  }
  return ctx.render("bbs/index.html", dict);
}

// GET /bbs/{board}/
Response show(const Settings& s, Request& req, Context& ctx) {
  const std::string& board = find_board(s, req);
  const int64_t page = int_arg(req.arg("page"), 1, 1, 1'000'000);

  auto guard = ctx.locks.shared(bbs::board_lock_name(board));  // readers share the lock
  BoardState state = bbs::read_board(*s.cache, ctx.data, guard, board);
  // The page is the same for every reader until the board changes (but for each reader's
  // CSRF token): rendered once per state of the board, then copied (view/page_cache.hpp).
  const int64_t shown = std::min(page, board_pages(s, state));
  return ctx.render_cached(
      *s.pages, board + '/' + std::to_string(shown), state.version, "bbs/board.html",
      [&](view::Dict& dict) { fill_board(dict, s, board, state, shown, nullptr, ""); });
}

[[noreturn]] void posting_too_fast(int64_t wait_s) {
  throw HttpError(429, "You are posting too fast. Please wait " + std::to_string(wait_s) +
                           " seconds and send it again.")
      .with_header("Retry-After", std::to_string(wait_s));
}

// POST /bbs/{board}/post
Response post(const Settings& s, Request& req, Context& ctx) {
  const std::string& board = find_board(s, req);

  // 1. Check the input before locking: other posters never wait for our validation.
  bbs::Checked form = bbs::check_post(req, s.limits);
  if (form.bad_encoding) throw HttpError(400, form.error);
  if (!form.error.empty()) {
    auto guard = ctx.locks.shared(bbs::board_lock_name(board));
    return refuse_post(ctx, s, board, bbs::read_board(*s.cache, ctx.data, guard, board), form.input,
                       form.error);
  }
  const std::string client = bbs::client_tag(req.client_address, s.secret);
  const int64_t now = unix_now();
  const bool flood_on = s.flood_interval_s > 0;

  // The delete password's hash is slow on purpose (tens of ms of CPU), so it comes after
  // every cheap refusal: a client posting too fast is turned away first, under a brief
  // shared lock of its flood record, and never makes the server hash. This early answer is
  // only a shortcut; the check that counts is repeated under the exclusive lock below (two
  // posts of one client may both pass here).
  if (flood_on) {
    auto flood_lock = ctx.locks.shared(bbs::flood_lock_name(client));
    if (int64_t wait = bbs::flood_wait_s(ctx.data, flood_lock, client, now, s.flood_interval_s)) {
      posting_too_fast(wait);
    }
  }
  // And the hash runs with NO lock held: nobody waits for it but this poster.
  std::string password_hash;
  if (!form.input.password.empty()) {
    auto hash = util::hash_password(form.input.password);
    if (!hash) throw std::runtime_error("cannot hash the delete password");
    password_hash = std::move(*hash);
  }

  // 2. LOCK before reading. A post reads and changes two things: the board, and (flood
  //    control on) the client's flood record. Both are taken as one set, in canonical
  //    order, so two posts can never deadlock (the P→Q / Q→P trap), and each is the
  //    smallest scope that works: posting to one board never waits for another board.
  //    Pitfall avoided: reading first and locking only around the write lets two posts read
  //    the same board and the second write erase the first.
  //    With flood control off the flood name is empty: that place of the set stays unlocked.
  const std::string flood_name = flood_on ? bbs::flood_lock_name(client) : std::string();
  auto [board_lock, flood_lock] =
      ctx.locks.exclusive_set({bbs::board_lock_name(board), flood_name});

  // 3. READ under the lock.
  if (flood_on) {
    if (int64_t wait = bbs::flood_wait_s(ctx.data, flood_lock, client, now, s.flood_interval_s)) {
      posting_too_fast(wait);
    }
  }
  BoardState state = bbs::read_board(*s.cache, ctx.data, board_lock, board);
  for (auto it = state.items.rbegin(); it != state.items.rend() && it - state.items.rbegin() < 5;
       ++it) {
    if (it->client == client && it->body == form.input.body && it->subject == form.input.subject) {
      throw HttpError(409, "This message is already on the board.");
    }
  }

  // 4. MODIFY in memory: the id comes from what we read under the lock, so it is unique.
  Post p{.id = state.last_id + 1,
         .time = now,
         .client = client,
         .password_hash = std::move(password_hash),
         .name = std::move(form.input.name),
         .subject = std::move(form.input.subject),
         .body = std::move(form.input.body)};

  // 5. WRITE: an append that is atomic (a crash leaves the old board or the new one) and
  //    fenced (refused if our lock was lost meanwhile).
  bbs::add_post(ctx.data, board_lock, board, state, p, s.keep);
  if (flood_on) {
    bbs::flood_record(ctx.data, flood_lock, client, now, s.flood_interval_s);
  }
  return Response::redirect("/bbs/" + board + "/");
}  // 6. unlocked here, when the guards leave scope

// POST /bbs/{board}/delete
//
// Checking a delete password is slow on purpose (~35 ms of CPU), and that changes the order.
// Hashing under the board's exclusive lock would make every reader of the board queue behind
// the hash: eight wrong guesses in parallel pushed every board page to a 190 ms median. So
// the slow step runs with no lock at all, between two short locked sections:
//
//   1. check the input                          (no lock)
//   2. LOCK shared, READ the post's hash        (readers are not held up; a copy is kept)
//   3. throttle, then VERIFY the password       (NO lock: only this request waits for it)
//   4. LOCK exclusive, READ again, check the post is still the one verified, MODIFY, WRITE
//
// Step 4 must read again: between the two locks another request may have deleted the post,
// or compacted the board. The post is "still the one" when the same id carries the same hash
// (ids are never reused, and the hash's salt is unique, so this cannot match a different post).
Response remove(const Settings& s, Request& req, Context& ctx) {
  // 1. Check the input.
  const std::string& board = find_board(s, req);
  const int64_t id = int_arg(req.field("id"), 0, 1, INT64_MAX);
  const std::string_view password = req.field("password");
  if (password.find('\0') != std::string_view::npos) {
    throw HttpError(400, "The password must not contain a NUL character.");
  }

  // 2. LOCK shared and READ: only the stored hash is needed (a copy of the post is returned,
  //    because the board's items are valid only while its lock is held).
  const std::string hash = bbs::read_post(s, ctx, board, id).password_hash;
  // unlocked here, before the slow part

  // 3. Throttle, then VERIFY with no lock held (403 / 429 otherwise).
  bbs::check_post_password(s, req, board, id, hash, password, "delete");

  // 4. LOCK exclusive, READ again, and delete only the post that was verified.
  auto board_lock = ctx.locks.exclusive(bbs::board_lock_name(board));
  BoardState state = bbs::read_board(*s.cache, ctx.data, board_lock, board);
  auto it = std::find_if(state.items.begin(), state.items.end(),
                         [&](const Post& p) { return p.id == id; });
  if (it == state.items.end()) {  // deleted by someone else meanwhile
    throw HttpError(404, "There is no post " + std::to_string(id) + ".");
  }
  if (it->password_hash != hash) {
    throw HttpError(409, "Post " + std::to_string(id) + " changed meanwhile. Please try again.");
  }
  std::vector<Post> kept(state.items.begin(), it);  // MODIFY
  kept.insert(kept.end(), it + 1, state.items.end());
  bbs::replace_posts(ctx.data, board_lock, board, kept, state.last_id);  // WRITE
  return Response::redirect("/bbs/" + board + "/");
}  // unlocked here, when `board_lock` leaves scope

// GET /bbs/{board}/posts.json?since=ID&limit=N
Response posts_json(const Settings& s, Request& req, Context& ctx) {
  const std::string& board = find_board(s, req);
  const bool has_since = req.query_params.has("since");
  const int64_t since = int_arg(req.arg("since"), 0, 0, INT64_MAX);
  const auto limit = static_cast<size_t>(int_arg(req.arg("limit"), 100, 1, 1000));

  auto guard = ctx.locks.shared(bbs::board_lock_name(board));
  BoardState state = bbs::read_board(*s.cache, ctx.data, guard, board);

  // Ascending ids: the first `limit` posts after `since`, or the newest `limit` without it.
  auto begin = state.items.begin();
  if (has_since) {
    begin = std::upper_bound(state.items.begin(), state.items.end(), since,
                             [](int64_t id, const Post& p) { return id < p.id; });
  } else if (state.items.size() > limit) {
    begin = state.items.end() - static_cast<long>(limit);
  }
  util::JsonWriter w;
  w.begin_object().key("board").value(board).key("posts").begin_array();
  size_t count = 0;
  for (auto it = begin; it != state.items.end() && count < limit; ++it, ++count) {
    w.begin_object()
        .key("id")
        .value(it->id)
        .key("time")
        .value(it->time)
        .key("name")
        .value(it->name)
        .key("subject")
        .value(it->subject)
        .key("body")
        .value(it->body)
        .key("edited_at");
    if (it->edited_at) {
      w.value(format_utc(it->edited_at, "%Y-%m-%dT%H:%M:%SZ"));
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array()
      .key("total")
      .value(static_cast<int64_t>(state.items.size()))
      .key("last_id")
      .value(state.last_id)
      .end_object();
  return Response::json(w.take());
}

}  // namespace

void mount_bbs(App& app) {
  auto s = std::make_shared<Settings>(app.secret());
  const Config& conf = app.conf();
  s->boards = conf.get_strings("bbs.boards");
  s->keep = static_cast<size_t>(conf.get_int("bbs.keep"));
  s->cache = bbs::make_board_cache(s->keep);
  s->page_size = static_cast<size_t>(conf.get_int("bbs.page_size"));
  s->pages = std::make_unique<view::PageCache>(static_cast<size_t>(conf.get_int("bbs.page_cache")));
  s->flood_interval_s = conf.get_int("bbs.flood_interval_s");
  s->limits = bbs::InputLimits::from(conf);
  s->edit_ttl = std::chrono::seconds(conf.get_int("bbs.edit_ttl_s"));
  // A table of 4096 keys is ~0.5 MiB at most; beyond it the oldest windows are forgotten.
  constexpr size_t kThrottleKeys = 4096;
  s->delete_per_client = std::make_unique<bbs::AttemptLimiter>(
      conf.get_int("bbs.delete_tries_per_client"), 60, kThrottleKeys);
  s->delete_per_post = std::make_unique<bbs::AttemptLimiter>(
      conf.get_int("bbs.delete_tries_per_post"), 60, kThrottleKeys);
  for (const auto& board : s->boards) {
    bool ok = !board.empty() && board.size() <= 32;
    for (char c : board)
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
    if (!ok) {
      throw ConfigError("bbs.boards: '" + board +
                        "' is not a board name (1-32 of a-z, 0-9, '-', '_')");
    }
  }

  Router& r = app.router();
  r.get("/bbs/", [s](Request& req, Context& ctx) { return index(*s, req, ctx); });
  r.get("/bbs/{board}/", [s](Request& req, Context& ctx) { return show(*s, req, ctx); });
  r.post("/bbs/{board}/post", [s](Request& req, Context& ctx) { return post(*s, req, ctx); });
  r.post("/bbs/{board}/delete", [s](Request& req, Context& ctx) { return remove(*s, req, ctx); });
  r.get("/bbs/{board}/posts.json",
        [s](Request& req, Context& ctx) { return posts_json(*s, req, ctx); });
  bbs::mount_edit(r, s);
}

namespace {

using enum config::KeyType;

// The [bbs] section of the conf (conf/kagi.toml documents each key at length).
constexpr config::KeySpec kBbsKeys[] = {
    config::KeySpec{"bbs.boards", kStringList, "general", 0, 0, "", "board names"},
    config::KeySpec{"bbs.keep", kInt, "1000", 1, 10000000, "", "posts kept per board"},
    config::KeySpec{"bbs.page_size", kInt, "20", 1, 1000, "", "posts per page"},
    config::KeySpec{"bbs.page_cache", kInt, "256", 0, 100000, "",
                    "rendered board pages kept per process until their board changes (0 = "
                    "render every time)"},
    config::KeySpec{"bbs.flood_interval_s", kInt, "10", 0, 86400, "",
                    "least seconds between posts from one client address (0 = off)"},
    config::KeySpec{"bbs.max_name_chars", kInt, "64", 1, 10000, "", "longest name"},
    config::KeySpec{"bbs.max_subject_chars", kInt, "120", 1, 10000, "", "longest subject"},
    config::KeySpec{"bbs.max_body_chars", kInt, "8000", 1, 1000000, "", "longest post body"},
    config::KeySpec{
        "bbs.delete_tries_per_client", kInt, "10", 0, 1000000, "",
        "delete password checks per minute from one client address (0 = no limit); more → 429"},
    config::KeySpec{"bbs.delete_tries_per_post", kInt, "10", 0, 1000000, "",
                    "delete password checks per minute on one post (0 = no limit); more → 429"},
    config::KeySpec{"bbs.edit_ttl_s", kInt, "600", 1, 86400, "",
                    "how long an opened editor holds a post's edit lock without a renewal"},
};

}  // namespace

AppModule bbs_module() { return {"bbs", kBbsKeys, "the sample bulletin board (/bbs/)", mount_bbs}; }

}  // namespace kagi::apps
