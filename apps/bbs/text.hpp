// apps/bbs/text.hpp — what the board does with user text: validate it, and turn a post
// body into safe HTML (escaped, line breaks kept, http(s) URLs made into links).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kagi::apps::bbs {

// Number of characters (Unicode code points) of valid UTF-8 text.
size_t char_count(std::string_view utf8);

// `text` (valid UTF-8) without the Unicode bidirectional controls: U+202A..U+202E (embeddings,
// overrides), U+2066..U+2069 (isolates), U+200E, U+200F (marks) and U+061C (Arabic letter
// mark). In a one-line field they reorder what is shown around them: a name ending in U+202E
// shows the rest of its line (the date, the next name) reversed, and "txt.exe" can be made
// to read "exe.txt". Names and subjects lose them; post bodies keep them, because writers of
// right-to-left languages need the marks and each body line is its own bidi paragraph.
std::string strip_bidi_controls(std::string_view text);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

// The body as HTML: everything escaped; http:// and https:// URLs become
// <a href="…" rel="nofollow ugc noopener">…</a>. Line breaks stay as '\n' (the page shows them
// with white-space: pre-wrap). Only http(s) links are made, so no javascript: URL can appear.
std::string body_html(std::string_view body);

}  // namespace kagi::apps::bbs
