// fuzz_lockd_line: bytes as kagi-lockd reads them, split into lines, each parsed
// (lockd/protocol.hpp) and, if it is a command, played on a key table (lockd/table.hpp) by
// one of four simulated connections, the way the server does. Invariants: a parsed command's
// keys are valid keys taken from the line, one mode each; the table never has an exclusive
// holder beside another holder, nor a head waiter that could have gone in; everything
// released leaves no key behind.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/lockd/protocol.hpp>
#include <kagi/lockd/table.hpp>
#include "fuzz_check.hpp"

namespace {

using kagi::lockd::Clock;
using kagi::lockd::Command;
using kagi::lockd::KeyTable;
using kagi::lockd::Mode;
using kagi::lockd::Verb;

struct Client : KeyTable::Owner {
  std::vector<KeyTable::Claim*> claims;
  void on_granted(KeyTable::Claim& c) override { FUZZ_CHECK(c.granted); }
};

void check_table(const KeyTable& t) {
  t.for_each_key([](const KeyTable::Key& k) {
    FUZZ_CHECK(k.holders.head || k.waiters.head);  // no state for a key nobody uses
    size_t exclusive = 0;
    for (const KeyTable::Claim* c = k.holders.head; c; c = c->next) {
      exclusive += c->mode == Mode::kExclusive;
    }
    FUZZ_CHECK(exclusive == 0 || k.holders.size == 1);
    if (k.waiters.head) {
      FUZZ_CHECK(k.holders.head &&
                 !(k.waiters.head->mode == Mode::kShared && k.holders.head->mode == Mode::kShared));
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  kagi::lockd::ParseLimits limits;
  limits.max_key_bytes = 32;
  limits.max_keys = 8;
  KeyTable table(1);
  Client clients[4];
  Command cmd;
  std::string why;
  size_t start = 0, n = 0;
  while (start <= input.size()) {
    const size_t nl = input.find('\n', start);
    const std::string_view line =
        input.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? input.size() + 1 : nl + 1;
    Client& client = clients[n++ % 4];
    why.clear();
    if (!kagi::lockd::parse_line(line, limits, cmd, &why)) {
      FUZZ_CHECK(!why.empty());
      continue;
    }
    FUZZ_CHECK(cmd.keys.size() == cmd.modes.size());
    for (std::string_view key : cmd.keys) {
      FUZZ_CHECK(kagi::lockd::check_key(key, limits.max_key_bytes).empty());
      FUZZ_CHECK(key.data() >= line.data() && key.data() + key.size() <= line.data() + line.size());
    }
    if (cmd.verb == Verb::kLock || cmd.verb == Verb::kShared || cmd.verb == Verb::kLockSet) {
      for (size_t i = 0; i < cmd.keys.size() && client.claims.size() < 64; ++i) {
        client.claims.push_back(table.request(cmd.keys[i], cmd.modes[i], client, Clock::now()));
      }
    } else if (cmd.verb == Verb::kUnlock && !client.claims.empty()) {
      table.release(client.claims.back(), Clock::now());
      client.claims.pop_back();
    }
    table.run_ready();
    check_table(table);
  }
  for (Client& c : clients) {
    for (KeyTable::Claim* claim : c.claims) table.release(claim, Clock::now());
  }
  table.run_ready();
  FUZZ_CHECK(table.keys() == 0 && table.holders() == 0 && table.waiters() == 0);
  return 0;
}
