// The booking app. Each room's bookings are one append-only log, booking/<room>.log, with a
// record "hour<TAB>name" per booked hour. Every handler takes the room's lock *before* it
// reads the log, so two people booking the same hour at the same moment cannot both read
// "free": the second one reads the first one's booking and gets 409.
#include "booking.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <kagi/app/app.hpp>
#include <kagi/app/http_error.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/record_fields.hpp>
#include <kagi/util/utf8.hpp>
#include <kagi/view/views.hpp>

namespace booking {
namespace {

using kagi::Context;
using kagi::HttpError;
using kagi::http::Request;
using kagi::http::Response;

// [tutorial:conf]
constexpr kagi::config::KeySpec kKeys[] = {
    {"booking.rooms", kagi::config::KeyType::kStringList, "orchid,lotus", 0, 0, "",
     "rooms that can be booked (lowercase letters, digits, '-')"},
    {"booking.first_hour", kagi::config::KeyType::kInt, "9", 0, 23, "", "first bookable hour"},
    {"booking.last_hour", kagi::config::KeyType::kInt, "17", 0, 23, "", "last bookable hour"},
};
// [end]

struct Settings {
  std::vector<std::string> rooms;
  int64_t first_hour = 9;
  int64_t last_hour = 17;
};

struct Booking {
  int64_t hour = 0;
  std::string name;
};

// [tutorial:names]
// One lock per room: bookings of different rooms never wait for each other.
std::string room_lock(const std::string& room) { return "booking/" + room; }
std::string room_log(const std::string& room) { return "booking/" + room + ".log"; }
// [end]

// The room's bookings, read under its lock (shared or exclusive).
std::vector<Booking> read_bookings(const Context& ctx, const kagi::lock::Guard& guard,
                                   const std::string& room) {
  std::vector<Booking> bookings;
  for (const auto& record : ctx.data.read_log(guard, room_log(room)).value()) {
    auto fields = kagi::store::split_fields(record, 2);
    if (!fields) continue;  // not a booking record: skipped, never misread
    auto hour = kagi::store::parse_int((*fields)[0]);
    if (hour) bookings.push_back({*hour, (*fields)[1]});
  }
  return bookings;
}

const std::string& known_room(const Settings& s, std::string_view room) {
  auto it = std::find(s.rooms.begin(), s.rooms.end(), room);
  if (it == s.rooms.end()) throw HttpError(404, "there is no room " + std::string(room));
  return *it;
}

Response show_rooms(const Settings& s, Context& ctx) {
  kagi::view::Dict page;
  for (const auto& room : s.rooms) {
    auto guard = ctx.locks.shared(room_lock(room));  // readers share the room
    std::vector<Booking> bookings = read_bookings(ctx, guard, room);
    guard.release();  // done reading: hold the lock no longer than needed
    kagi::view::Dict row = page.add_section("ROOM");
    row.set("NAME", room);
    for (int64_t hour = s.first_hour; hour <= s.last_hour; ++hour) {
      kagi::view::Dict slot = row.add_section("SLOT");
      slot.set("HOUR", hour);
      auto taken = std::find_if(bookings.begin(), bookings.end(),
                                [&](const Booking& b) { return b.hour == hour; });
      if (taken != bookings.end()) {
        slot.set("BY", taken->name);
        slot.show_section("TAKEN");
      } else {
        slot.show_section("FREE");
      }
    }
  }
  return ctx.render("booking/rooms.html", page);
}

// [tutorial:book]
Response book(const Settings& s, Request& req, Context& ctx) {
  const std::string& room = known_room(s, req.param("room"));
  auto hour = kagi::store::parse_int(req.field("hour"));
  if (!hour || *hour < s.first_hour || *hour > s.last_hour) {
    throw HttpError(400, "hour must be a whole hour from " + std::to_string(s.first_hour) + " to " +
                             std::to_string(s.last_hour));
  }
  std::string name(req.field("name"));
  if (name.empty() || name.size() > 60 || !kagi::util::valid_utf8(name)) {
    throw HttpError(400, "name must be 1 to 60 bytes of UTF-8");
  }

  // 1. Lock the room first: from here on no other request can book it.
  auto guard = ctx.locks.exclusive(room_lock(room));
  // 2. Read under the lock: what we see is what is there.
  for (const auto& b : read_bookings(ctx, guard, room)) {
    if (b.hour == *hour) throw HttpError(409, "that hour is already booked by " + b.name);
  }
  // 3. Write under the same lock: one appended record, fsynced before we answer.
  ctx.data.append(guard, room_log(room), kagi::store::join_fields({req.field("hour"), name}))
      .check();
  // 4. The lock is released when `guard` goes out of scope (and at the latest when the
  //    request ends).
  return Response::redirect("/booking/");
}
// [end]

void check_room_names(const Settings& s) {
  for (const auto& room : s.rooms) {
    const bool ok = !room.empty() && std::all_of(room.begin(), room.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    if (!ok) {
      throw kagi::ConfigError("booking.rooms: '" + room +
                              "' is not a room name (lowercase letters, digits, '-')");
    }
  }
}

// [tutorial:mount]
void mount(kagi::App& app) {
  auto s = std::make_shared<Settings>();
  s->rooms = app.conf().get_strings("booking.rooms");
  s->first_hour = app.conf().get_int("booking.first_hour");
  s->last_hour = app.conf().get_int("booking.last_hour");
  check_room_names(*s);
  app.router().get("/booking/", [s](Request&, Context& ctx) { return show_rooms(*s, ctx); });
  app.router().post("/booking/{room}/book",
                    [s](Request& req, Context& ctx) { return book(*s, req, ctx); });
}
// [end]

}  // namespace

kagi::AppModule module() { return {"booking", kKeys, "room booking", mount}; }

}  // namespace booking
