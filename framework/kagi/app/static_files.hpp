// app/static_files.hpp — serves a folder of small assets (CSS, JavaScript, images) from
// memory. Files are read once when mounted; a request can only name a file that was there
// then, so no request path ever reaches the filesystem.
#pragma once

#include <string>

#include <kagi/app/app.hpp>

namespace kagi {

// Serves every regular file directly in `dir` at `url_prefix` + name ("/static/kagi.css").
// Throws std::runtime_error if `dir` cannot be read.
void mount_static(App& app, const std::string& dir, const std::string& url_prefix);

}  // namespace kagi
