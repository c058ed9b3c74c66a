// apps/bbs/text.hpp — what the board does with user text: validate it, and turn a post
// body into safe HTML (escaped, line breaks kept, http(s) URLs made into links).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kagi::apps::bbs {

// Number of characters (Unicode code points) of valid UTF-8 text.
size_t char_count(std::string_view utf8);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

// The body as HTML: everything escaped; http:// and https:// URLs become
// <a href="…" rel="nofollow ugc noopener">…</a>. Line breaks stay as '\n' (the page shows them
// with white-space: pre-wrap). Only http(s) links are made, so no javascript: URL can appear.
std::string body_html(std::string_view body);

}  // namespace kagi::apps::bbs
