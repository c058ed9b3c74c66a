// booking.hpp — a room-booking page whose slots are never double-booked.
//
//   GET  /booking/                the rooms, each hour free or taken, a form per free hour
//   POST /booking/{room}/book     hour, name, _csrf → 303 to /booking/ (409: already taken)
//
// Conf section [booking]: rooms (names), first_hour, last_hour.
#pragma once

#include <kagi/app/app_module.hpp>

namespace booking {

// The app, its [booking] conf keys and its routes, for kagi::serve.
kagi::AppModule module();

}  // namespace booking
