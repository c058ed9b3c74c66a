// apps/common/tag_buckets.hpp — small per-client records shared by every worker process of a
// host: the BBS's flood control and the chat's say limit.
//
// Clients are known by a tag (a keyed hash of their address, never the address itself). One
// file for every client would make every request queue behind one lock, so clients are spread
// over kTagBuckets files by their tag; a request locks and rewrites only its own client's
// bucket ("<prefix>/<NN>" as lock name, "<prefix>/<NN>.txt" under data.dir). A bucket file is
// lines of "<tag> <number>" (a time, in the unit the app chooses).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kagi::apps {

inline constexpr int kTagBuckets = 64;

// "07": the bucket of `tag` (its first four hex digits, modulo kTagBuckets), two digits.
std::string tag_bucket(std::string_view tag);
// "<prefix>/<bucket>": the lock of `tag`'s bucket; the file is tag_bucket_path().
std::string tag_bucket_lock(std::string_view prefix, std::string_view tag);
std::string tag_bucket_path(std::string_view prefix, std::string_view tag);

// Calls fn(tag, number) for each well-formed "<tag> <number>" line of a bucket file; other
// lines (torn, hand-edited) are skipped.
void for_each_tag_line(std::string_view text,
                       const std::function<void(std::string_view tag, int64_t number)>& fn);
// Appends the line "<tag> <number>\n" to `out`.
void append_tag_line(std::string& out, std::string_view tag, int64_t number);

}  // namespace kagi::apps
