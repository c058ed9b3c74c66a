// lock/mode.hpp — the two modes a named lock is taken in.
//
// Shared holders of a name exclude exclusive ones and each other's writes; one exclusive
// holder excludes everyone. Storage reads under either, commits only under exclusive.
#pragma once

#include <string_view>

namespace kagi::lock {

enum class Mode : unsigned char { kShared, kExclusive };

// "shared" / "exclusive".
constexpr std::string_view to_string(Mode mode) {
  return mode == Mode::kShared ? "shared" : "exclusive";
}

}  // namespace kagi::lock
