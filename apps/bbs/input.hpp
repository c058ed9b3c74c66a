// apps/bbs/input.hpp — checking what a poster typed, before any lock is taken: validation
// needs no shared state, so it must not make other requests wait.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "http/request.hpp"

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

// Reads fields name, subject, body, password. Invalid UTF-8 is refused (400 by the caller:
// the returned `bad_encoding`); control characters are stripped, \r\n becomes \n, and
// surrounding white space is trimmed. Returns "" when the input is acceptable, else a
// message for the poster.
struct Checked {
  PostInput input;
  std::string error;
  bool bad_encoding = false;
};
Checked check_post(const http::Request& request, const InputLimits& limits);

// A stable, non-reversible tag for a client address (flood and duplicate checks keep no
// addresses on disk).
std::string client_tag(std::string_view address);

}  // namespace kagi::apps::bbs
