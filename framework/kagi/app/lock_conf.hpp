// app/lock_conf.hpp — the lock layer's options from a site's conf (the locks.* keys).
//
// What App opens its LockService with; tools that lock what a site locks (kagi-fsck) use the
// same, so that they take the site's locks in the site's backend.
#pragma once

#include <kagi/config/config.hpp>
#include <kagi/lock/options.hpp>

namespace kagi {

lock::LockOptions lock_options(const Config& conf);

}  // namespace kagi
