// pg/errors.hpp — how the PostgreSQL client layer reports failure, as std::error_code values
// (category "kagi.pg"). Each failing call also says why in words (the server's message, or
// what the connection was doing), for the log line and the error page.
#pragma once

#include <string>
#include <system_error>

namespace kagi::pg {

enum class Errc {
  kUnavailable = 1,  // cannot connect, or the connection broke (server down, network, auth)
  kTimeout,          // no answer before the deadline (the connection is closed: its state is
                     // unknown)
  kPoolExhausted,    // every connection of the pool is in use until the deadline
  kQuery,            // the server refused a statement (see Reply::sqlstate)
  kBadOptions,       // the connection string does not parse
};

const std::error_category& pg_category();
std::error_code make_error_code(Errc e);

}  // namespace kagi::pg

template <>
struct std::is_error_code_enum<kagi::pg::Errc> : std::true_type {};
