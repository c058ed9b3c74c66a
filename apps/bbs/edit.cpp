// Editing a post: an offline lock for the edit, a request lock for the save.
//
// The protocol (docs/OFFLINE_LOCKS.md, "The BBS edit flow"):
//
//   open    check the post's password (no lock held while hashing), then take the post's
//           offline lock (exclusive-write: one editor, everyone may still read the board) for
//           bbs.edit_ttl_s, held by the editor's session. Someone else holds it → 423, told
//           now, before any typing: "being edited by <name> since <time>, free at <time>".
//   edit    the page shows the post as it is now, with its version; while open it renews the
//           lock.
//   save    1. check the input                          (no lock)
//           2. LOCK the board exclusive                 (request lock: the read-modify-write)
//           3. under it, RENEW the offline lock: does this session still hold it? (expired,
//              released by an admin, taken over → 409, nothing saved)
//           4. READ the post; its version must be the one the editor loaded (409 otherwise)
//           5. MODIFY and WRITE the board (atomic and fenced, like every write)
//           6. release the offline lock, unlock the board
//
// The offline lock decides who may edit; the request lock still makes the save one atomic
// step against every other writer of the board (posts, deletes), which take no offline lock.
#include "bbs/edit.hpp"

#include <charconv>
#include <chrono>

#include <kagi/app/http_error.hpp>
#include <kagi/app/session.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/offline/lock_manager.hpp>
#include <kagi/util/json.hpp>
#include <kagi/util/log.hpp>
#include <kagi/view/views.hpp>
#include "bbs/text.hpp"
#include "common/args.hpp"

namespace kagi::apps::bbs {
namespace {

using offline::Holder;
using offline::Kind;

constexpr const char* kSecondsFormat = "%Y-%m-%d %H:%M:%S UTC";

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The post id in the path; anything but a positive number names no post (404).
int64_t post_id(const Request& req) {
  const std::string_view text = req.param("id");
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || id <= 0) {
    throw HttpError(404, "There is no post " + std::string(text) + ".");
  }
  return id;
}

std::string edit_url(const std::string& board, int64_t id) {
  return "/bbs/" + board + "/edit/" + std::to_string(id);
}

// "9 min 58 s": the time left on an editor's lock.
std::string time_left(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, ms / 1000);
  if (s < 60) return std::to_string(s) + " s";
  return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
}

// What the edit page shows besides the post.
struct Page {
  enum Mode { kEditor, kHeld, kAsk } mode = kAsk;
  std::optional<Holder> holder;      // kEditor: this session's lock; kHeld: the other's
  std::string subject, body;         // kEditor: the form's text (the post's, or what was typed)
  std::vector<std::string> notices;  // told to this session (its lock was taken away)
  std::string error;
  std::string name;  // kAsk: the name to prefill
};

Response render(Context& ctx, const std::string& board, const Post& post, const Page& page,
                int status) {
  view::Dict dict;
  dict.set("BOARD", board);
  dict.set("ID", post.id);
  dict.set("SUBJECT", post.subject.empty() ? "(no subject)" : post.subject);
  dict.set("NAME", post.name);
  dict.set("TIME", format_utc(post.time, kTimeFormat));
  if (post.edited_at)
    dict.add_section("EDITED").set("TIME", format_utc(post.edited_at, kTimeFormat));
  dict.set_trusted_html("BODY_HTML", body_html(post.body));
  for (const std::string& n : page.notices) dict.add_section("NOTICE").set("MESSAGE", n);
  if (!page.error.empty()) dict.add_section("ERROR").set("MESSAGE", page.error);
  const int64_t now = now_ms();
  if (page.mode == Page::kEditor) {
    view::Dict e = dict.add_section("EDITOR");
    e.set("FORM_SUBJECT", page.subject);
    e.set("FORM_BODY", page.body);
    e.set("VERSION", post.version);
    e.set("LEFT", time_left(page.holder->expires_ms - now));
    e.set("LEFT_S", std::max<int64_t>(0, (page.holder->expires_ms - now) / 1000));
  } else if (page.mode == Page::kHeld) {
    view::Dict h = dict.add_section("HELD");
    h.set("HOLDER", page.holder->owner_name.empty() ? "someone" : page.holder->owner_name);
    h.set("SINCE", format_utc(page.holder->since_ms / 1000, kSecondsFormat));
    h.set("FREE_AT", format_utc((page.holder->expires_ms + 999) / 1000, kSecondsFormat));
  } else if (post.password_hash.empty()) {
    dict.show_section("NO_PASSWORD");
  } else {
    dict.add_section("ASK").set("FORM_NAME", page.name);
  }
  return ctx.render("bbs/edit.html", dict, status);
}

// This session's owner id, if the request came with a live session.
std::optional<std::string> session_owner(Context& ctx) {
  if (!ctx.session.exists()) return std::nullopt;
  return ctx.session.owner();
}

// Sorts the key's holders into this session's and another's.
void find_holders(Context& ctx, const std::string& key, const std::optional<std::string>& owner,
                  std::optional<Holder>& mine, std::optional<Holder>& theirs) {
  for (Holder& h : ctx.offline.inspect(key).value()) {
    if (owner && h.owner == *owner) {
      mine = std::move(h);
    } else if (!theirs) {
      theirs = std::move(h);
    }
  }
}

std::vector<std::string> notices_for(Context& ctx, const std::optional<std::string>& owner) {
  return owner ? ctx.offline.take_notices(*owner).value() : std::vector<std::string>();
}

// GET /bbs/{board}/edit/{id}
Response edit_page(const Settings& s, Request& req, Context& ctx) {
  const std::string& board = find_board(s, req);
  const int64_t id = post_id(req);
  const Post post = read_post(s, ctx, board, id);  // under the board's shared lock; 404
  // Who may edit it: the offline lock table says (looking needs no request lock).
  const std::optional<std::string> owner = session_owner(ctx);
  Page page;
  page.notices = notices_for(ctx, owner);
  std::optional<Holder> mine, theirs;
  find_holders(ctx, edit_lock_key(board, id), owner, mine, theirs);
  if (mine) {
    page.mode = Page::kEditor;
    page.holder = std::move(mine);
    page.subject = post.subject;
    page.body = post.body;
  } else if (theirs) {
    page.mode = Page::kHeld;
    page.holder = std::move(theirs);
  } else {
    page.name = ctx.session.name();
  }
  return render(ctx, board, post, page, 200);
}

// POST /bbs/{board}/edit/{id}/open
Response open_editor(const Settings& s, Request& req, Context& ctx) {
  // 1. Check the input (no lock).
  const std::string& board = find_board(s, req);
  const int64_t id = post_id(req);
  Checked form = check_editor(req, s.limits);
  if (form.bad_encoding) throw HttpError(400, form.error);
  const Post post = read_post(s, ctx, board, id);  // the hash, under a brief shared lock
  if (!form.error.empty()) {
    Page page;
    page.error = form.error;
    return render(ctx, board, post, page, 400);
  }
  // 2. The post's password, checked with no lock held (403 / 429).
  check_post_password(s, req, board, id, post.password_hash, form.input.password, "edit");

  // 3. Proven: this browser may edit the post. A privilege change, so the session gets a new
  //    id (one planted beforehand stops working), then the name it shows to others.
  ctx.session.rotate();
  if (!form.input.name.empty()) ctx.session.set_name(form.input.name);
  const offline::Owner owner{ctx.session.owner(), ctx.session.name()};

  // 4. LOCK (offline): one editor at a time. Refused → told now, before any typing.
  const offline::Grant grant =
      ctx.offline.acquire(edit_lock_key(board, id), Kind::kExclusiveWrite, owner, s.edit_ttl)
          .value();
  if (grant.outcome == offline::Grant::kTooMany) {
    throw HttpError(429,
                    "You have too many posts open in editors. Save or cancel one of them "
                    "first.");
  }
  if (!grant.granted()) {
    Page page;
    page.mode = Page::kHeld;
    page.holder = grant.holders.front();
    return render(ctx, board, post, page, 423);
  }
  return Response::redirect(edit_url(board, id));
}

// Answers a save whose session holds no lock (any more): nothing was saved, and the text the
// editor typed is shown again so that it is not lost.
Response lock_gone(Context& ctx, const std::string& board, const Post& post, const Checked& form) {
  Page page;
  page.mode = Page::kAsk;
  page.error =
      "Nothing was saved: you no longer hold this post's edit lock (it ran out, was released, "
      "or was taken over). Your text is below; open the editor again to apply it.\n\nSubject: " +
      form.input.subject + "\n\n" + form.input.body;
  page.name = ctx.session.name();
  return render(ctx, board, post, page, 409);
}

// POST /bbs/{board}/edit/{id}
Response save(const Settings& s, Request& req, Context& ctx) {
  // 1. Check the input (no lock).
  const std::string& board = find_board(s, req);
  const int64_t id = post_id(req);
  Checked form = check_edit(req, s.limits);
  if (form.bad_encoding) throw HttpError(400, form.error);
  const bool has_version = !req.field("version").empty();
  const int64_t version = int_arg(req.field("version"), 0, 1, INT64_MAX);
  const std::string key = edit_lock_key(board, id);
  const std::optional<std::string> owner = session_owner(ctx);

  // 2. LOCK the board: the save is a read-modify-write of the board like any other.
  auto board_lock = ctx.locks.exclusive(board_lock_name(board));
  // 3. Under it: does this session still hold the post's offline lock? (Renewed, so that it
  //    cannot run out between this check and the write.)
  BoardState state = read_board(*s.cache, ctx.data, board_lock, board);
  auto it = std::find_if(state.items.begin(), state.items.end(),
                         [&](const Post& p) { return p.id == id; });
  if (it == state.items.end()) throw HttpError(404, "There is no post " + std::to_string(id) + ".");
  if (!owner || ctx.offline.renew(key, *owner).value() == 0) {
    return lock_gone(ctx, board, *it, form);
  }
  if (!form.error.empty()) {
    Page page;
    page.mode = Page::kEditor;
    page.holder = ctx.offline.holds(key, *owner).value();
    page.subject = form.input.subject;
    page.body = form.input.body;
    page.error = form.error;
    if (!page.holder) return lock_gone(ctx, board, *it, form);
    return render(ctx, board, *it, page, 400);
  }
  // 4. The post must be the version the editor loaded (another edit in between → 409).
  if (has_version && it->version != version) {
    throw HttpError(409, "Post " + std::to_string(id) +
                             " was changed since your editor loaded it. Nothing was saved; "
                             "open the editor again to see the new text.");
  }
  // 5. MODIFY and WRITE.
  std::vector<Post> posts(state.items.begin(), state.items.end());
  Post& edited = posts[static_cast<size_t>(it - state.items.begin())];
  edited.subject = std::move(form.input.subject);
  edited.body = std::move(form.input.body);
  edited.edited_at = unix_now();
  edited.version += 1;
  replace_posts(ctx.data, board_lock, board, posts, state.last_id);
  // 6. The edit is done: its offline lock goes back. (Saved either way: if the table cannot
  //    be reached now, the lock simply runs out.)
  if (auto released = ctx.offline.release(key, *owner); !released.ok()) {
    util::log_warn("bbs: saved post " + std::to_string(id) +
                   " but kept its edit lock: " + released.status().message());
  }
  return Response::redirect("/bbs/" + board + "/#p" + std::to_string(id));
}  // unlocked here

// POST /bbs/{board}/edit/{id}/renew — JSON, for the open editor page.
Response renew(const Settings& s, Request& req, Context& ctx) {
  const std::string& board = find_board(s, req);
  const int64_t id = post_id(req);
  const std::optional<std::string> owner = session_owner(ctx);
  const int64_t expires = owner ? ctx.offline.renew(edit_lock_key(board, id), *owner).value() : 0;
  util::JsonWriter w;
  w.begin_object().key("held").value(expires != 0);
  if (expires) {
    w.key("expires_at").value(format_utc(expires / 1000, "%Y-%m-%dT%H:%M:%SZ"));
    w.key("left_s").value((expires - now_ms()) / 1000);
  }
  w.end_object();
  return Response::json(w.take(), expires ? 200 : 409);
}

// POST /bbs/{board}/edit/{id}/cancel
Response cancel(const Settings& s, Request& req, Context& ctx) {
  const std::string& board = find_board(s, req);
  const int64_t id = post_id(req);
  if (auto owner = session_owner(ctx)) {
    (void)ctx.offline.release(edit_lock_key(board, id), *owner).value();
  }
  return Response::redirect("/bbs/" + board + "/#p" + std::to_string(id));
}

}  // namespace

void mount_edit(Router& r, std::shared_ptr<const Settings> s) {
  r.get("/bbs/{board}/edit/{id}",
        [s](Request& req, Context& ctx) { return edit_page(*s, req, ctx); });
  r.post("/bbs/{board}/edit/{id}/open",
         [s](Request& req, Context& ctx) { return open_editor(*s, req, ctx); });
  r.post("/bbs/{board}/edit/{id}", [s](Request& req, Context& ctx) { return save(*s, req, ctx); });
  r.post("/bbs/{board}/edit/{id}/renew",
         [s](Request& req, Context& ctx) { return renew(*s, req, ctx); });
  r.post("/bbs/{board}/edit/{id}/cancel",
         [s](Request& req, Context& ctx) { return cancel(*s, req, ctx); });
}

}  // namespace kagi::apps::bbs
