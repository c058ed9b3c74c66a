// lock/detail/lockd_status.hpp — kagi-lockd's STATUS answer read back into registry entries,
// for the admin page and kagi-locks (lock/cluster_status.hpp).
//
// STATUS answers one JSON object per key, then "end" (docs/LOCKD.md):
//   {"key":"bbs/3","holders":[{"mode":"exclusive","token":17,"client":"10.0.0.5:41234",
//     "label":"kagi/web1/812 1f.. POST /bbs/3/post","held_ms":12}],"waiters":[...]}
// A label of kagi's (kagi/<host>/<pid> <request id> <method> <path>) fills host, pid and the
// request; any other label (a PHP script's CLIENT line, or none) leaves the request id as
// the label and the host as the client's address.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include <kagi/lock/registry.hpp>

namespace kagi::lock::detail {

// Appends the holders and waiters of one STATUS line to `out` (`now`: when the answer came,
// to turn held_ms / waiting_ms into `since`). False if the line is not such an object.
bool parse_lockd_status_line(std::string_view line, std::chrono::system_clock::time_point now,
                             std::vector<RegistryEntry>& out);

}  // namespace kagi::lock::detail
