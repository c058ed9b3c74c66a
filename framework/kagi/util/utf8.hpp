// util/utf8.hpp — input validation for user text (BBS posts, chat lines, names): is a byte
// string well-formed UTF-8, and the same text with invisible control characters (or
// bidirectional formatting characters) removed.
//
// Both work on bytes and never allocate more than the input size. Validate first, then strip:
// strip_control_chars does not repair broken UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace kagi::util {

// True when `s` is well-formed UTF-8 (RFC 3629): no overlong forms, no UTF-16 surrogates
// (U+D800–U+DFFF), nothing above U+10FFFF, no truncated or stray continuation bytes.
// The empty string and NUL bytes are valid (reject NUL with strip_control_chars).
bool valid_utf8(std::string_view s);

// `s` without control characters: C0 controls (U+0000–U+001F), DEL (U+007F) and C1 controls
// (U+0080–U+009F, the bytes C2 80–C2 9F) are dropped. With `keep_newlines`, '\n' and '\t'
// stay, and "\r\n" and a lone '\r' become '\n' (one line-ending convention in storage);
// without it every line break and tab is dropped (single-line fields). Bytes that are not
// a control character are copied unchanged, so valid UTF-8 in gives valid UTF-8 out.
std::string strip_control_chars(std::string_view s, bool keep_newlines);

// `s` without the Unicode bidirectional formatting characters: LRM and RLM (U+200E, U+200F),
// the embeddings and overrides LRE, RLE, PDF, LRO, RLO (U+202A–U+202E), the isolates LRI,
// RLI, FSI, PDI (U+2066–U+2069) and the Arabic letter mark ALM (U+061C). For one-line fields
// (names, subjects): there an unterminated override turns the rest of the shown line around
// ("ann" + RLO + "txt.exe" reads "annexe.txt"). Body text keeps them: right-to-left writers
// need the marks, and each body line is its own paragraph. Every other byte is copied
// unchanged, so valid UTF-8 in gives valid UTF-8 out.
std::string strip_bidi_controls(std::string_view s);

}  // namespace kagi::util
