#include <kagi/lockd/protocol.hpp>

#include <charconv>
#include <cstdio>

#include <kagi/util/utf8.hpp>

namespace kagi::lockd {
namespace {

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

// The next space-separated word of `rest` (consumed with its separator). Two spaces in a row
// or a trailing space make an empty word, which every caller refuses.
std::string_view next_word(std::string_view& rest) {
  const size_t space = rest.find(' ');
  std::string_view word = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  return word;
}

bool parse_number(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_timeout(std::string_view text, int64_t& out, std::string* why) {
  uint64_t ms = 0;
  if (!parse_number(text, ms) || ms > static_cast<uint64_t>(kMaxTimeoutMs)) {
    return fail(why, "bad timeout (milliseconds, 0.." + std::to_string(kMaxTimeoutMs) + ")");
  }
  out = static_cast<int64_t>(ms);
  return true;
}

bool take_key(std::string_view word, const ParseLimits& limits, Command& out, Mode mode,
              std::string* why) {
  if (std::string bad = check_key(word, limits.max_key_bytes); !bad.empty()) {
    return fail(why, std::move(bad));
  }
  out.keys.push_back(word);
  out.modes.push_back(mode);
  return true;
}

// LOCKSET's first word: exclusive | shared | x/s per key, optionally /<timeout_ms>.
bool parse_set(std::string_view rest, const ParseLimits& limits, Command& out, std::string* why) {
  std::string_view mode = next_word(rest);
  if (const size_t slash = mode.find('/'); slash != std::string_view::npos) {
    if (!parse_timeout(mode.substr(slash + 1), out.timeout_ms, why)) return false;
    mode = mode.substr(0, slash);
  }
  const bool all_x = mode == "exclusive", all_s = mode == "shared";
  if (!all_x && !all_s &&
      (mode.empty() || mode.find_first_not_of("xs") != std::string_view::npos)) {
    return fail(why, "bad LOCKSET mode (exclusive, shared, or one x or s per key)");
  }
  if (rest.data() == nullptr) return fail(why, "LOCKSET needs at least one key");
  while (rest.data() != nullptr) {
    if (out.keys.size() == limits.max_keys) {
      return fail(why, "too many keys (at most " + std::to_string(limits.max_keys) + ")");
    }
    const std::string_view key = next_word(rest);
    Mode m = all_x ? Mode::kExclusive : Mode::kShared;
    if (!all_x && !all_s) {
      if (out.keys.size() >= mode.size()) {
        return fail(why, "LOCKSET mode '" + std::string(mode) + "' names " +
                             std::to_string(mode.size()) + " keys, more are given");
      }
      m = mode[out.keys.size()] == 'x' ? Mode::kExclusive : Mode::kShared;
    }
    if (!take_key(key, limits, out, m, why)) return false;
  }
  if (!all_x && !all_s && out.keys.size() != mode.size()) {
    return fail(why, "LOCKSET mode '" + std::string(mode) + "' names " +
                         std::to_string(mode.size()) + " keys, " + std::to_string(out.keys.size()) +
                         " are given");
  }
  // Canonical order needs distinct keys: a key twice would wait on itself.
  for (size_t i = 0; i < out.keys.size(); ++i) {
    for (size_t j = i + 1; j < out.keys.size(); ++j) {
      if (out.keys[i] == out.keys[j]) return fail(why, "key listed twice in LOCKSET");
    }
  }
  return true;
}

}  // namespace

std::string_view to_string(Mode mode) { return mode == Mode::kShared ? "shared" : "exclusive"; }

std::string check_key(std::string_view key, size_t max_key_bytes) {
  if (key.empty()) return "empty key (commands take single spaces)";
  if (key.size() > max_key_bytes) {
    return "key is longer than " + std::to_string(max_key_bytes) + " bytes";
  }
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    // C1 controls are two bytes in UTF-8: C2 80 .. C2 9F.
    if (c < 0x20 || c == 0x7f ||
        (c == 0xc2 && i + 1 < key.size() && static_cast<unsigned char>(key[i + 1]) <= 0x9f &&
         static_cast<unsigned char>(key[i + 1]) >= 0x80)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "control character in key (byte %zu)", i + 1);
      return buf;
    }
  }
  if (!util::valid_utf8(key)) return "key is not valid UTF-8";
  return {};
}

bool parse_line(std::string_view line, const ParseLimits& limits, Command& out, std::string* why) {
  out.keys.clear();
  out.modes.clear();
  out.timeout_ms = -1;
  out.seed_form = false;
  out.token = 0;
  out.text = {};
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  for (size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "control character 0x%02x in line (byte %zu)", c, i + 1);
      return fail(why, buf);
    }
  }
  if (!util::valid_utf8(line)) return fail(why, "line is not valid UTF-8");
  std::string_view rest = line;
  const std::string_view verb = next_word(rest);
  if (verb == "LOCK" || verb == "SHARED") {
    out.verb = verb == "LOCK" ? Verb::kLock : Verb::kShared;
    const Mode mode = verb == "LOCK" ? Mode::kExclusive : Mode::kShared;
    if (!take_key(next_word(rest), limits, out, mode, why)) return false;
    if (rest.data() == nullptr) {  // no timeout word at all
      out.seed_form = verb == "LOCK";
      return true;
    }
    if (!parse_timeout(next_word(rest), out.timeout_ms, why)) return false;
    if (rest.data() != nullptr) return fail(why, "too many words after " + std::string(verb));
    return true;
  }
  if (verb == "LOCKSET") {
    out.verb = Verb::kLockSet;
    if (rest.data() == nullptr) return fail(why, "LOCKSET needs a mode and keys");
    return parse_set(rest, limits, out, why);
  }
  if (verb == "UNLOCK") {
    out.verb = Verb::kUnlock;
    if (rest.data() == nullptr) return true;  // everything the connection holds
    if (!take_key(next_word(rest), limits, out, Mode::kExclusive, why)) return false;
    if (rest.data() != nullptr) return fail(why, "UNLOCK takes one key or none");
    return true;
  }
  if (verb == "VERIFY") {
    out.verb = Verb::kVerify;
    if (!take_key(next_word(rest), limits, out, Mode::kExclusive, why)) return false;
    if (!parse_number(next_word(rest), out.token) || rest.data() != nullptr) {
      return fail(why, "VERIFY needs a key and a token");
    }
    return true;
  }
  if (verb == "CLIENT" || verb == "AUTH") {
    out.verb = verb == "CLIENT" ? Verb::kClient : Verb::kAuth;
    if (rest.empty()) return fail(why, std::string(verb) + " needs text after it");
    if (rest.size() > limits.max_text_bytes) {
      return fail(why, std::string(verb) + " text is longer than " +
                           std::to_string(limits.max_text_bytes) + " bytes");
    }
    out.text = rest;
    return true;
  }
  if (verb == "STATUS" || verb == "PING") {
    out.verb = verb == "STATUS" ? Verb::kStatus : Verb::kPing;
    if (rest.data() != nullptr) return fail(why, std::string(verb) + " takes no arguments");
    return true;
  }
  if (verb.empty()) return fail(why, "empty command");
  return fail(why,
              "unknown command (LOCK, SHARED, LOCKSET, UNLOCK, VERIFY, CLIENT, STATUS, "
              "PING, AUTH)");
}

}  // namespace kagi::lockd
