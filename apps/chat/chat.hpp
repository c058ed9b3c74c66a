// apps/chat/chat.hpp — the sample chat, mounted at /chat/: long-poll waits that hold no thread
// and no lock.
//
//   GET  /chat/                                   the rooms (conf chat.rooms)
//   GET  /chat/{room}/                            the last messages, a say form, chat.js
//   POST /chat/{room}/say                         form name, text, _csrf; or a JSON body
//                                                 {"name","text"} + header X-CSRF-Token
//                                                 → 200 {"id":N} (303 back to the room for a
//                                                 browser form without JavaScript)
//   GET  /chat/{room}/messages?since=ID&wait=S    → 200 {"messages":[...],"last":ID}; waits up
//                                                 to min(S, 30) s for news, parked
//   GET  /chat/{room}/who                         → 200 {"room":..,"who":[names seen < 60 s]}
//   GET  /chat/stats.json                         this process's parked-request counters
//
// Limits (docs/CHAT.md): a say beyond chat.say_burst / chat.say_per_minute per client address
// (host-wide) and a poll beyond chat.max_waiters / chat.max_waiters_per_client (per process)
// get 429 + Retry-After; only a poll that carries X-CSRF-Token marks its name= present; bidi
// controls are removed from names. The API's errors are JSON: {"error":"..."}.
//
// Read chat.cpp top to bottom: writers lock briefly, readers share, a waiting client holds
// nothing. docs/CHAT.md explains the design.
#pragma once

#include <kagi/app/app.hpp>
#include <kagi/app/app_module.hpp>

namespace kagi::apps {

void mount_chat(App& app);

// The app with its [chat] conf keys, for kagi::serve.
AppModule chat_module();

}  // namespace kagi::apps
