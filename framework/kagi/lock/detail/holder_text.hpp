// lock/detail/holder_text.hpp — who holds a lock, written where a lock server shows it: the
// postgres backend's statement comment (/*kagi <request id> <method> <path> */) and the lockd
// backend's CLIENT label (kagi/<host>/<pid> <request id> <method> <path>).
//
// The request's fields come from the client (the path above all), so they are
// percent-encoded: only [A-Za-z0-9/._~-] pass as they are, so no field can hold a space, end a
// comment or break a line, and decode_holder_text() gives back the bytes.
#pragma once

#include <string>
#include <string_view>

#include <kagi/lock/holder_info.hpp>

namespace kagi::lock::detail {

// Appends at most `max` bytes of `text` (before encoding), each byte outside
// [A-Za-z0-9/._~-] as %XX.
void append_holder_text(std::string& out, std::string_view text, size_t max);

// "<request id> <method> <path>", each field encoded as above (40, 16 and 160 bytes at most).
std::string holder_fields(const HolderInfo& who);

// Undoes the %XX of append_holder_text (a '%' not followed by two hex digits stays).
std::string decode_holder_text(std::string_view text);

}  // namespace kagi::lock::detail
