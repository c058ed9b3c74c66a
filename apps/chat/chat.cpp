// The chat: a tutorial in long-polling without holding threads or locks.
//
// Three kinds of request, three lessons:
//
//   say       a WRITER locks its room exclusively, reads, appends, and unlocks at once,
//             then wakes the waiting readers, with no lock held;
//   messages  a READER shares the room's lock with every other reader; when there is no news
//             it PARKS the request and returns: the worker thread goes back to serve others,
//             the lock is released, and the request waits as a small entry in the ParkingLot
//             until news, its deadline, or its client leaving;
//   who       presence lives under its OWN lock, so keeping it current never makes a writer
//             or a reader of the room wait.
//
// And three limits, because the chat is open to anyone: a say takes a token from its
// client's bucket (flood.hpp: host-wide, 429 beyond chat.say_per_minute), a poll parks only
// while its process and its client have places left (chat.max_waiters,
// chat.max_waiters_per_client: 429 beyond), and only a request that carries the page's CSRF
// token marks a name present.
//
// Wake-ups cross processes through the store the rooms live in (see watcher.hpp): a message
// appended by any process (of any host, with data on PostgreSQL) completes the parked
// requests of every process.
#include "chat/chat.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <memory>

#include <kagi/app/csrf.hpp>
#include <kagi/app/http_error.hpp>
#include <kagi/http/form.hpp>
#include <kagi/http/json_body.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_store.hpp>
#include <kagi/store/durable_scope.hpp>
#include <kagi/util/json.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/utf8.hpp>
#include <kagi/view/views.hpp>
#include "chat/flood.hpp"
#include "chat/parking.hpp"
#include "chat/presence.hpp"
#include "chat/room.hpp"
#include "chat/watcher.hpp"
#include "common/args.hpp"

namespace kagi::apps {
namespace {

using chat::Message;
using chat::ParkingLot;
using chat::RoomState;

constexpr size_t kMaxNameBytes = 64;
constexpr size_t kMaxTextBytes = 2000;
constexpr size_t kPageMessages = 50;  // messages shown on the room page
constexpr int64_t kMaxWaitS = 30;     // a long-poll waits at most this long
// Retry-After of a poll refused for want of a place: parked polls leave within kMaxWaitS, most
// much sooner; a browser tab polls again after this.
constexpr int64_t kPollRetryAfterS = 5;

// The chat's state for the life of the process: settings read once at mount, the parked
// long-polls, and the watcher thread that finishes them.
struct Chat {
  Chat(App& a, ParkingLot::Limits limits) : app(a), lot(limits) {}
  ~Chat() {
    // Stop the timers first, then answer whoever still waits: no request is left hanging.
    watcher.reset();
    lot.close_all();
  }
  Chat(const Chat&) = delete;
  Chat& operator=(const Chat&) = delete;

  App& app;
  std::vector<std::string> rooms;
  size_t keep = 200;
  chat::SayLimit say_limit;                // per_minute 0: no flood control
  std::unique_ptr<chat::RoomCache> cache;  // made once chat.keep is known
  chat::PresenceMemo presence;
  ParkingLot lot;
  std::unique_ptr<chat::RoomWatcher> watcher;  // null when the store cannot watch (logged)
};

constexpr const char* kTimeFormat = "%H:%M";

// The room named in the path, or 404. Only configured rooms exist, so a hostile name never
// reaches the lock layer or the filesystem.
const std::string& find_room(const Chat& c, const Request& req) {
  std::string_view name = req.param("room");
  for (const auto& room : c.rooms) {
    if (room == name) return room;
  }
  throw HttpError(404, "There is no room called '" + std::string(name) + "'.");
}

// A single-line user field: valid UTF-8, no control characters, within `max` bytes.
std::string clean_line(std::string_view field, std::string_view what, size_t max) {
  if (!util::valid_utf8(field)) throw HttpError(400, std::string(what) + " is not valid UTF-8.");
  std::string text = util::strip_control_chars(field, /*keep_newlines=*/false);
  const auto first = text.find_first_not_of(' ');
  text =
      first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(' ') - first + 1);
  if (text.size() > max) {
    throw HttpError(400, std::string(what) + " is longer than " + std::to_string(max) +
                             " bytes; shorten it and send it again.");
  }
  return text;
}

// A name: a clean line without bidirectional controls (see bidi.hpp). Validated before
// stripping: removing bytes must not turn broken UTF-8 into something that passes.
std::string clean_name(std::string_view field) {
  if (!util::valid_utf8(field)) throw HttpError(400, "The name is not valid UTF-8.");
  return clean_line(util::strip_bidi_controls(field), "The name", kMaxNameBytes);
}

// The chat's API (say, messages, who) answers errors in JSON, {"error":"what and what to
// do"}, with the status and headers (Retry-After) of the HttpError; pages keep HTML errors.
Response json_error(const HttpError& e) {
  util::JsonWriter w;
  w.begin_object().key("error").value(std::string_view(e.what())).end_object();
  Response r = Response::json(w.take(), e.status());
  for (const auto& [name, value] : e.headers().items()) r.headers.set(name, value);
  r.headers.set("Cache-Control", "no-store");
  return r;
}

// A browser's own form submission (no script) wants pages back, not JSON.
bool wants_html(const Request& req) {
  std::string_view type = req.headers.get("Content-Type").value_or("");
  if (type.starts_with("application/json")) return false;
  std::string_view accept = req.headers.get("Accept").value_or("");
  return accept.starts_with("text/html");
}

// A long-poll's answer: never cached, never held back by a buffering proxy.
Response poll_answer(std::string json) {
  Response r = Response::json(std::move(json));
  r.headers.set("Cache-Control", "no-store");
  r.headers.set("X-Accel-Buffering", "no");
  return r;
}

// --- presence (its own lock) -------------------------------------------------------------

// Marks `name` as present in `room`. Most calls do nothing: a name this process saw in the
// last few seconds is not looked at again (c.presence). Then most only read: a name seen
// recently by any process is not written again. When it must write, it takes the exclusive
// lock and READS AGAIN: what it read under the shared lock may have changed between the two
// locks (check-then-act).
void note_presence(Chat& c, Context& ctx, const std::string& room, const std::string& name,
                   int64_t now) {
  if (name.empty() || c.presence.fresh(room, name, now)) return;
  {
    auto who = ctx.locks.shared(chat::who_lock_name(room));
    auto seen = chat::parse_presence(ctx.data.read(who, chat::who_path(room)).value());
    if (!chat::needs_touch(seen, name, now)) {
      c.presence.remember(room, name, *chat::last_seen(seen, name));
      return;
    }
  }
  auto who = ctx.locks.exclusive(chat::who_lock_name(room));                           // lock
  auto seen = chat::parse_presence(ctx.data.read(who, chat::who_path(room)).value());  // read
  if (chat::needs_touch(seen, name, now)) {                                            // modify
    chat::touch(seen, name, now);
    ctx.data.commit(who, chat::who_path(room), chat::encode_presence(seen)).check();  // write
  }  // else someone did it between our two locks
  c.presence.remember(room, name, chat::last_seen(seen, name).value_or(now));
}

// --- pages -------------------------------------------------------------------------------

// GET /chat/ — the room list comes from the configuration: no shared state, so no lock.
Response index(const Chat& c, Request&, Context& ctx) {
  view::Dict dict;
  for (const auto& room : c.rooms) dict.add_section("ROOM").set("NAME", room);
  return ctx.render("chat/index.html", dict);
}

// GET /chat/{room}/ — the page the script then keeps current. Two locks, one after the
// other (never both at once): the room's messages, then its presence list.
Response show(const Chat& c, Request& req, Context& ctx) {
  const std::string& room = find_room(c, req);
  view::Dict dict;
  dict.set("ROOM", room);
  {
    auto guard = ctx.locks.shared(chat::room_lock_name(room));  // readers share
    RoomState state = chat::read_room(*c.cache, ctx.data, guard, room);
    // Keep what the page shows, then let go of the room: everything below works on our copy.
    const std::vector<Message> page(state.items.end() - static_cast<std::ptrdiff_t>(std::min(
                                                            state.items.size(), kPageMessages)),
                                    state.items.end());
    const int64_t last_id = state.last_id;
    guard.release();
    dict.set("LAST", last_id);
    for (const Message& m : page) {
      view::Dict row = dict.add_section("MESSAGE");
      row.set("ID", m.id);
      row.set("TIME", format_utc(m.time, kTimeFormat));
      row.set("NAME", m.name);
      row.set("TEXT", m.text);
    }
    if (page.empty()) dict.show_section("EMPTY");
  }
  {
    auto who = ctx.locks.shared(chat::who_lock_name(room));
    auto seen = chat::parse_presence(ctx.data.read(who, chat::who_path(room)).value());
    for (const auto& name : chat::present(seen, unix_now())) {
      dict.add_section("WHO").set("NAME", name);
    }
  }
  dict.set("FORM_NAME", clean_name(req.arg("name")));
  return ctx.render("chat/room.html", dict);
}

// --- say: the writer ---------------------------------------------------------------------

struct SayInput {
  std::string name;
  std::string text;
  bool json = false;  // sent as a JSON body (by the script)
};

// The form fields, or the JSON body the pipeline left unparsed. The CSRF token was already
// checked by the pipeline (field _csrf or header X-CSRF-Token).
SayInput read_say(const Request& req) {
  SayInput in;
  std::string_view type = req.headers.get("Content-Type").value_or("");
  if (type.starts_with("application/json")) {
    std::string error;
    auto members = http::parse_flat_json_object(req.body, error);
    if (!members) throw HttpError(400, "The JSON body is not usable: " + error + ".");
    auto field = [&](std::string_view key) -> std::string_view {
      auto it = members->find(key);
      return it == members->end() ? std::string_view() : std::string_view(it->second);
    };
    in.name = clean_name(field("name"));
    in.text = clean_line(field("text"), "The message", kMaxTextBytes);
    in.json = true;
  } else {
    in.name = clean_name(req.field("name"));
    in.text = clean_line(req.field("text"), "The message", kMaxTextBytes);
  }
  if (in.text.empty()) throw HttpError(400, "The message is empty; type something to say.");
  if (in.name.empty()) in.name = "Anonymous";
  return in;
}

// Takes one token from the client's bucket, or throws 429 with Retry-After. The bucket is
// host-wide (a file under its own lock, flood.hpp); the lock is let go before the room's is
// taken, so a say never holds two chat locks. A say refused later (503, a failed write) has
// spent its token anyway: the limit counts attempts.
void take_say_token(const Chat& c, const Request& req, Context& ctx) {
  if (c.say_limit.per_minute == 0) return;
  const std::string tag = chat::client_tag(req.client_address, c.app.secret());
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  auto bucket = ctx.locks.exclusive(chat::flood_lock_name(tag));                  // lock
  const std::string text = ctx.data.read(bucket, chat::flood_path(tag)).value();  // read
  chat::SayVerdict verdict = chat::take_say(text, tag, now_ms, c.say_limit);      // modify
  if (!verdict.allowed) {
    throw HttpError(429, "You are sending messages too fast. Wait " +
                             std::to_string(verdict.retry_after_s) + " s and send it again.")
        .with_header("Retry-After", std::to_string(verdict.retry_after_s));
  }
  ctx.data.commit(bucket, chat::flood_path(tag), verdict.new_text).check();  // write
}

// POST /chat/{room}/say
Response say(Chat& c, Request& req, Context& ctx) {
  const std::string& room = find_room(c, req);

  // 1. Check the input before locking: nobody waits for our validation. Then the flood
  //    control: its own lock, taken and let go before the room's.
  SayInput in = read_say(req);
  take_say_token(c, req, ctx);
  const int64_t now = unix_now();

  std::vector<Message> recent;
  int64_t id = 0;
  {
    // 2. LOCK the room exclusively, before reading: the id we give must be unique, so it is
    //    derived from what we read under the same lock we write under.
    auto room_lock = ctx.locks.exclusive(chat::room_lock_name(room));
    // 3. READ.
    RoomState state = chat::read_room(*c.cache, ctx.data, room_lock, room);
    // 4. MODIFY in memory.
    Message m{.id = state.last_id + 1, .time = now, .name = in.name, .text = std::move(in.text)};
    id = m.id;
    // 5. WRITE: an atomic, fenced append (refused if our lock was lost meanwhile).
    chat::add_message(ctx.data, room_lock, room, state, m, c.keep);
    // Pollers of this process parked on the room get the news below, after the unlock:
    // copy it while the room is still ours. (A poller parks under the shared lock, so none
    // can park between this check and our unlock without reading our message first.)
    if (c.lot.has_waiters(room)) {
      recent.assign(state.items.begin(), state.items.end());
      recent.push_back(std::move(m));
    }
  }  // 6. UNLOCKED here: the writer held the room only for one read and one append.

  // Wake this process's waiters ourselves, with no lock held: we know every message up to
  // `id`. Other processes are woken by their watchers (the append changed the room's log).
  // 7. DURABLE before anyone is told: with data.fsync = "always" the waiters are woken once our
  //    message is flushed (in one fsync with the other requests', after the unlock), and so is
  //    our own answer; this thread does not wait for it.
  if (!recent.empty()) {
    store::after_durable(
        [&lot = c.lot, room, recent = std::move(recent), id] { lot.deliver(room, recent, id); });
  }
  note_presence(c, ctx, room, in.name, now);

  if (wants_html(req)) {
    std::string back = "/chat/" + room + "/";
    if (in.name != "Anonymous") back += "?name=" + http::percent_encode(in.name);
    return Response::redirect(back);
  }
  util::JsonWriter w;
  w.begin_object().key("id").value(id).end_object();
  return Response::json(w.take());
}

// --- messages: the reader that may park --------------------------------------------------

// GET /chat/{room}/messages?since=ID&wait=S[&name=N]
Response messages(Chat& c, Request& req, Context& ctx) {
  const std::string& room = find_room(c, req);
  const int64_t since = int_arg(req.arg("since"), 0, 0, INT64_MAX);
  const int64_t wait_s = std::min(int_arg(req.arg("wait"), 0, 0, INT64_MAX), kMaxWaitS);
  const int64_t now = unix_now();
  // Presence only from the page's own script: it sends the CSRF token in X-CSRF-Token, which
  // another site cannot read, so a link or an <img> elsewhere cannot mark anyone present.
  // Without the token the poll is answered the same, it just does not count as presence.
  const std::string name = clean_name(req.arg("name"));
  if (ctx.csrf_proven(req)) note_presence(c, ctx, room, name, now);

  // LOCK shared: any number of pollers read the room at once; only a writer excludes them.
  auto guard = ctx.locks.shared(chat::room_lock_name(room));
  RoomState state = chat::read_room(*c.cache, ctx.data, guard, room);

  // News, no wish to wait, or a client ahead of the room (it then resyncs to `last`):
  // answer now.
  if (state.last_id != since || wait_s == 0 || c.watcher == nullptr) {
    return poll_answer(chat::messages_json(chat::newer_than(state.items, since), state.last_id));
  }

  // Nothing new: PARK. We still hold the shared lock here, and a writer needs the exclusive
  // one, so no message can be stored between our read and our parking: the next message
  // is sure to find us in the lot. Returning releases the lock and frees this thread.
  Deferred later = ctx.defer();
  const ParkingLot::ParkResult parked = c.lot.park(ParkingLot::Waiter{
      .room = room,
      .client = req.client_address,
      .since = since,
      .deadline = ParkingLot::Clock::now() + std::chrono::seconds(wait_s),
      .complete =
          [later](std::string json) { return later.complete(poll_answer(std::move(json))); },
      .gone = [later] { return later.client_gone(); }});
  if (parked.admission != ParkingLot::Admission::kParked) {
    // No place left: the lot kept nothing, so we answer the request we deferred ourselves.
    const bool lot_full = parked.admission == ParkingLot::Admission::kLotFull;
    later.complete(json_error(
        HttpError(429, lot_full ? "The chat has too many clients waiting for news right now. "
                                  "Poll again in " +
                                      std::to_string(kPollRetryAfterS) + " s."
                                : "Your address has too many polls waiting already. Close "
                                  "other chat tabs, or poll again in " +
                                      std::to_string(kPollRetryAfterS) + " s.")
            .with_header("Retry-After", std::to_string(kPollRetryAfterS))));
    return Response();  // ignored: answered above
  }
  c.watcher->watch();  // before the shared lock goes (see watcher.hpp)
  if (parked.earliest) c.watcher->wake();
  return Response();  // ignored: the lot answers later
}  // the shared lock is released here; the parked request holds nothing but its lot entry

// GET /chat/{room}/who
Response who(const Chat& c, Request& req, Context& ctx) {
  const std::string& room = find_room(c, req);
  auto guard = ctx.locks.shared(chat::who_lock_name(room));
  auto seen = chat::parse_presence(ctx.data.read(guard, chat::who_path(room)).value());
  guard.release();
  util::JsonWriter w;
  w.begin_object().key("room").value(room).key("who").begin_array();
  for (const auto& name : chat::present(seen, unix_now())) w.value(name);
  w.end_array().end_object();
  return Response::json(w.take());
}

// GET /chat/stats.json — this process's long-poll counters (tests use them to prove that
// parked requests do not leak).
Response stats(const Chat& c, Request&, Context&) {
  ParkingLot::Stats s = c.lot.stats();
  util::JsonWriter w;
  w.begin_object()
      .key("pid")
      .value(static_cast<int64_t>(::getpid()))
      .key("parked")
      .value(static_cast<uint64_t>(s.parked))
      .key("parked_total")
      .value(s.total)
      .key("delivered")
      .value(s.delivered)
      .key("expired")
      .value(s.expired)
      .key("gone")
      .value(s.gone)
      .key("refused")
      .value(s.refused)
      .key("clients")
      .value(static_cast<uint64_t>(s.clients))
      .key("refreshes")
      .value(c.watcher ? c.watcher->refreshes() : uint64_t{0})
      .end_object();
  return poll_answer(w.take());
}

// The watcher's re-read of a room another process changed: the same shared lock a poller
// takes, from a lock context of its own (it serves no request).
void refresh(Chat& c, const std::string& room) {
  if (std::find(c.rooms.begin(), c.rooms.end(), room) == c.rooms.end()) return;
  auto locks = c.app.locks().context(lock::HolderInfo{.request_id = "chat-watcher",
                                                      .method = "WATCH",
                                                      .path = "/chat/" + room + "/",
                                                      .client_address = ""});
  std::vector<Message> recent;
  int64_t last_id = 0;
  {
    auto guard = locks->shared(chat::room_lock_name(room));
    RoomState state = chat::read_room(*c.cache, c.app.data(), guard, room);
    recent.assign(state.items.begin(), state.items.end());  // ours once the lock goes
    last_id = state.last_id;
  }
  locks->end_request();
  c.lot.deliver(room, recent, last_id);  // no lock held while answering
}

// Mounts an API handler: its HttpErrors become JSON (json_error), except for a browser's own
// form post, which gets the usual error page.
template <typename Handler>
auto api(std::shared_ptr<Chat> c, Handler handler) {
  return [c = std::move(c), handler](Request& req, Context& ctx) -> Response {
    try {
      return handler(*c, req, ctx);
    } catch (const HttpError& e) {
      if (wants_html(req)) throw;
      return json_error(e);
    }
  };
}

}  // namespace

void mount_chat(App& app) {
  const Config& conf = app.conf();
  auto c = std::make_shared<Chat>(
      app, ParkingLot::Limits{.max_waiters = static_cast<size_t>(conf.get_int("chat.max_waiters")),
                              .max_waiters_per_client = static_cast<size_t>(
                                  conf.get_int("chat.max_waiters_per_client"))});
  c->say_limit = {.per_minute = conf.get_int("chat.say_per_minute"),
                  .burst = conf.get_int("chat.say_burst")};
  c->rooms = conf.get_strings("chat.rooms");
  c->keep = static_cast<size_t>(conf.get_int("chat.keep"));
  c->cache = chat::make_room_cache(c->keep);
  for (const auto& room : c->rooms) {
    bool ok = !room.empty() && room.size() <= 32;
    for (char ch : room) {
      ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_');
    }
    if (!ok) {
      throw ConfigError("chat.rooms: '" + room +
                        "' is not a room name (1-32 of a-z, 0-9, '-', '_')");
    }
  }

  std::error_code ec;
  Chat* raw = c.get();  // the watcher lives inside *c and is stopped by ~Chat
  std::unique_ptr<chat::RoomWatcher> watcher;
  if (auto feed = app.data().watch(chat::kRoomsFolder, ec)) {
    watcher = std::make_unique<chat::RoomWatcher>(
        std::move(feed), chat::kRoomsFolder, c->lot,
        [raw](const std::string& room) { refresh(*raw, room); }, ec);
  }
  if (ec) {
    // Without wake-ups a poll cannot wait: it is answered at once (clients poll again).
    util::log_error("chat: cannot watch " + std::string(chat::kRoomsFolder) + " (" + ec.message() +
                    "); long-polls are answered at once");
  } else {
    c->watcher = std::move(watcher);
  }

  // On SIGTERM, answer every parked long-poll at once (clients poll again), so they do not
  // hold up the stop. Weak: the chat must still die with the router, before the services.
  app.on_shutdown([weak = std::weak_ptr<Chat>(c)] {
    if (auto chat = weak.lock()) chat->lot.close_all();
  });

  Router& r = app.router();
  r.get("/chat/", [c](Request& req, Context& ctx) { return index(*c, req, ctx); });
  r.get("/chat/stats.json", [c](Request& req, Context& ctx) { return stats(*c, req, ctx); });
  r.get("/chat/{room}/", [c](Request& req, Context& ctx) { return show(*c, req, ctx); });
  r.post("/chat/{room}/say", api(c, say));
  r.get("/chat/{room}/messages", api(c, messages));
  r.get("/chat/{room}/who", api(c, who));
}

namespace {

using enum config::KeyType;

// The [chat] section of the conf (conf/kagi.toml documents each key at length).
constexpr config::KeySpec kChatKeys[] = {
    config::KeySpec{"chat.rooms", kStringList, "lobby", 0, 0, "", "room names"},
    config::KeySpec{"chat.keep", kInt, "200", 1, 1000000, "", "messages kept per room"},
    config::KeySpec{"chat.say_per_minute", kInt, "30", 0, 60000, "",
                    "messages one client address may say per minute, host-wide, after its burst; "
                    "beyond → 429 (0 = no limit)"},
    config::KeySpec{"chat.say_burst", kInt, "10", 1, 100000, "",
                    "messages one client address may say at once before say_per_minute applies"},
    config::KeySpec{
        "chat.max_waiters", kInt, "512", 1, 1000000, "",
        "long-polls parked at once per process (each holds a connection); beyond → 429"},
    config::KeySpec{"chat.max_waiters_per_client", kInt, "16", 1, 1000000, "",
                    "long-polls parked at once per process from one client address; beyond → 429"},
};

}  // namespace

AppModule chat_module() { return {"chat", kChatKeys, "the sample chat (/chat/)", mount_chat}; }

}  // namespace kagi::apps
