// apps/chat/bidi.hpp — Unicode bidirectional controls in chat names.
//
// A name is shown before the message ("ann: hi"). An unterminated right-to-left override in
// it (U+202E) would turn the rest of the line around, so a name could make a message read
// as something its author never wrote, or pass for another name. Names are one line of
// plain text: they have no use for invisible direction controls, so the chat removes them,
// as it removes the other invisible controls (util::strip_control_chars). Message text keeps
// them: right-to-left writers need the marks, and the text ends the line, so it can only
// turn itself around.
#pragma once

#include <string>
#include <string_view>

namespace kagi::apps::chat {

// `utf8` without the bidirectional formatting characters: LRM and RLM (U+200E, U+200F), the
// embeddings and overrides LRE, RLE, PDF, LRO, RLO (U+202A–U+202E), the isolates LRI, RLI,
// FSI, PDI (U+2066–U+2069) and the Arabic letter mark ALM (U+061C). Every other byte is
// copied unchanged, so valid UTF-8 in gives valid UTF-8 out.
std::string strip_bidi_controls(std::string_view utf8);

}  // namespace kagi::apps::chat
