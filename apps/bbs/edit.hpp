// apps/bbs/edit.hpp — editing a post, the board's example of offline locks
// (docs/OFFLINE_LOCKS.md): the editor's session holds the post's offline lock across the
// requests of one edit (open, type for minutes, save), and the save still takes the board's
// request lock for its read-modify-write.
//
//   GET  /bbs/{board}/edit/{id}          the editor (this session holds the lock), "being
//                                        edited by ..." (another does), or the password form
//   POST /bbs/{board}/edit/{id}/open     password, name: takes the lock → 303 (403, 423, 429)
//   POST /bbs/{board}/edit/{id}          subject, body, version: saves → 303 (409: lock gone)
//   POST /bbs/{board}/edit/{id}/renew    the open editor page keeps its lock (JSON)
//   POST /bbs/{board}/edit/{id}/cancel   gives the lock back → 303
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <kagi/app/router.hpp>
#include "bbs/settings.hpp"

namespace kagi::apps::bbs {

// The offline lock of one post's editor: "bbs/post/<board>/<id>".
inline std::string edit_lock_key(std::string_view board, int64_t id) {
  return "bbs/post/" + std::string(board) + "/" + std::to_string(id);
}

void mount_edit(Router& router, std::shared_ptr<const Settings> settings);

}  // namespace kagi::apps::bbs
