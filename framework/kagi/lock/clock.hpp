// lock/clock.hpp — the clock every deadline of the lock layer is measured on.
//
// CLOCK_MONOTONIC: a wall-clock step (NTP, an admin's `date`) never stretches or cuts a wait.
#pragma once

#include <chrono>

namespace kagi::lock {

using Clock = std::chrono::steady_clock;

}  // namespace kagi::lock
