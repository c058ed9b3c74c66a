// lockd/protocol.hpp — kagi-lockd's line protocol: one command line in, a Command out.
//
//   lockd::Command cmd;
//   std::string why;
//   if (!lockd::parse_line("LOCK bbs/3 500", limits, cmd, &why)) reply("error " + why);
//
// The grammar (docs/LOCKD.md has the replies): upper-case command words, single spaces,
// keys of 1..max_key_bytes bytes of valid UTF-8 with no space and no control character.
//
//   LOCK <key>                       the seed's form: bare "ok", released by close or UNLOCK
//   LOCK <key> <timeout_ms>          "ok <token>" or "busy"; 0 = try once
//   SHARED <key> [<timeout_ms>]
//   LOCKSET <mode>[/<timeout_ms>] <key>...   mode: exclusive | shared | one x/s per key
//   UNLOCK [<key>]                   one key, or everything the connection holds
//   VERIFY <key> <token>             "ok" or "lost"
//   CLIENT <label>   STATUS   PING   AUTH <secret>
//
// No sockets here: the parser only looks at the bytes it is given, so a fuzzer can drive it
// (tests/fuzz/lockd). It never throws and never allocates unless `why` is filled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::lockd {

enum class Mode : uint8_t { kShared, kExclusive };
std::string_view to_string(Mode mode);

enum class Verb : uint8_t {
  kLock,
  kShared,
  kLockSet,
  kUnlock,
  kVerify,
  kClient,
  kStatus,
  kPing,
  kAuth
};

struct ParseLimits {
  size_t max_key_bytes = 256;   // lockd.max_key_bytes
  size_t max_keys = 64;         // lockd.max_keys_per_connection: keys of one LOCKSET at most
  size_t max_text_bytes = 512;  // a CLIENT label or an AUTH secret
};

// The longest wait a command may ask for (one day): a bound that is really no bound is
// written without a timeout.
inline constexpr int64_t kMaxTimeoutMs = 86'400'000;

struct Command {
  Verb verb = Verb::kPing;
  // The keys in the order given (views into the parsed line), with one mode each.
  std::vector<std::string_view> keys;
  std::vector<Mode> modes;
  int64_t timeout_ms = -1;  // -1: wait without a bound (plain LOCK, LOCKSET without /ms)
  bool seed_form = false;   // `LOCK <key>` exactly: the seed's bare "ok" and its release rules
  uint64_t token = 0;       // VERIFY
  std::string_view text;    // CLIENT's label, AUTH's secret
};

// Parses `line` (without its '\n'; one trailing '\r' is ignored) into `out`, reusing its
// vectors. False with the reason in `why` (for "error <why>") if the line is not a command.
bool parse_line(std::string_view line, const ParseLimits& limits, Command& out, std::string* why);

// Empty if `key` is a valid key; else why not ("key is longer than 256 bytes").
std::string check_key(std::string_view key, size_t max_key_bytes);

}  // namespace kagi::lockd
