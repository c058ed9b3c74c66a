// apps/bbs/input.hpp — checking what a poster typed, before any lock is taken: validation
// needs no shared state, so it must not make other requests wait.
#pragma once

#include <cstdint>
#include <string>

#include <kagi/config/config.hpp>
#include <kagi/http/request.hpp>
#include <kagi/util/secret.hpp>

namespace kagi::apps::bbs {

struct InputLimits {
  size_t max_name_chars = 64;
  size_t max_subject_chars = 120;
  size_t max_body_chars = 8000;
  static InputLimits from(const Config& conf);
};

struct PostInput {
  std::string name;  // "Anonymous" when left empty
  std::string subject;
  std::string body;
  std::string password;  // the delete password, may be empty
};

// Reads fields name, subject, body, password. Invalid UTF-8, and a NUL byte in the password
// (crypt(3) cannot hash it), are refused (400 by the caller: the returned `bad_encoding`);
// control characters are stripped, bidi controls too from name and subject
// (util::strip_bidi_controls), \r\n becomes \n, and surrounding white space is trimmed. `error` is
// "" when the input is acceptable, else a message for the poster.
struct Checked {
  PostInput input;
  std::string error;
  bool bad_encoding = false;
};
Checked check_post(const http::Request& request, const InputLimits& limits);

// An edit's fields subject and body, checked like a post's (the name stays the poster's).
Checked check_edit(const http::Request& request, const InputLimits& limits);
// Opening an editor: the fields password (the post's) and name (the editor's, optional; ""
// when left empty), checked like a post's.
Checked check_editor(const http::Request& request, const InputLimits& limits);

// A stable tag for a client address (flood and duplicate checks keep no addresses on disk):
// HMAC-SHA-256 under the server secret, 8 bytes as 16 hex characters. Keyed, because an
// unkeyed hash of an IPv4 address is reversed by trying all 2^32 addresses in seconds; without
// the secret the data files tell nothing about who posted. (Tags written before the key was
// used were FNV-1a hashes; they simply stop matching, which only forgets old flood records.)
std::string client_tag(std::string_view address, const util::Secret& secret);

}  // namespace kagi::apps::bbs
