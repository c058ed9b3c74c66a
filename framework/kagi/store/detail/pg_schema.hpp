// store/detail/pg_schema.hpp — the tables of the postgres DataStore, created and migrated at
// start (docs/STORAGE.md lists them).
//
// kagi_schema_version holds the version the data is at. Each migration step takes the data
// from version N - 1 to N in one transaction; processes starting at once are serialised by an
// advisory lock, so each step runs once. Data at a newer version than this build knows is
// refused: an older kagi must not write a schema it does not understand.
#pragma once

#include <string>
#include <system_error>

#include <kagi/pg/connection.hpp>

namespace kagi::store::detail {

// The SQLSTATE kagi_fence() raises when a newer holder of the lock already wrote.
inline constexpr std::string_view kFenceRefused = "KG001";

// Brings the schema to `target` (PgDataStore::kSchemaVersion). Empty on success; else
// pg::Errc::kQuery with `why` naming the step and the server's reason (or saying the data is
// newer), or the connection's error.
std::error_code migrate(pg::Connection& conn, int target, pg::Clock::time_point deadline,
                        std::string* why);

}  // namespace kagi::store::detail
