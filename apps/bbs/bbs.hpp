// apps/bbs/bbs.hpp — the sample bulletin board, mounted at /bbs/.
//
//   GET  /bbs/                         boards with post counts and last post time
//   GET  /bbs/{board}/?page=N          posts newest first, and the post form
//   POST /bbs/{board}/post             name, subject, body, password, _csrf → 303
//   POST /bbs/{board}/delete           id, password, _csrf → 303 (403: wrong password)
//   GET  /bbs/{board}/posts.json?since=ID&limit=N
//
// Read bbs.cpp top to bottom: every handler shows the lock → read → modify → write order.
#pragma once

#include <kagi/app/app.hpp>
#include <kagi/app/app_module.hpp>

namespace kagi::apps {

void mount_bbs(App& app);

// The app with its [bbs] conf keys, for kagi::serve.
AppModule bbs_module();

}  // namespace kagi::apps
