// offline/detail/schema.hpp — the tables of sessions and offline locks (docs/OFFLINE_LOCKS.md,
// "Tables"), the same for SQLite and PostgreSQL but for the column types.
#pragma once

#include <string>

namespace kagi::offline::detail {

// CREATE ... IF NOT EXISTS for every table and index; `integer` is the type of the numbers
// ("INTEGER" for SQLite, "bigint" for PostgreSQL).
std::string schema_sql(const std::string& integer);

// The tables schema_sql makes, for a check that they are all there.
inline constexpr const char* kTables[] = {"kagi_sessions", "kagi_offline_locks",
                                          "kagi_offline_notices", "kagi_offline_counters"};

}  // namespace kagi::offline::detail
