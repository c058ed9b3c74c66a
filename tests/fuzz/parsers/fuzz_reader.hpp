// fuzz/fuzz_reader.hpp — FuzzReader: a fuzz input taken apart as choices (a byte at a time) and
// payloads (runs of bytes). Past the end, a byte reads as 0 and a run comes back short.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

struct FuzzReader {
  std::string_view in;
  size_t pos = 0;
  uint8_t byte() { return pos < in.size() ? static_cast<uint8_t>(in[pos++]) : 0; }
  std::string_view take(size_t n) {
    n = std::min(n, in.size() - pos);
    std::string_view s = in.substr(pos, n);
    pos += n;
    return s;
  }
  std::string_view rest() { return take(in.size() - pos); }
};
