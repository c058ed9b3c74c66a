// store/detail/pg_feed.hpp — PgDataStore::watch(): LISTEN kagi_data on a connection of its own.
//
// Writers below a watched folder NOTIFY kagi_data with the path in their transaction, so the
// notice arrives after the commit, from any host. A broken connection (server restart, network
// cut) is reopened by a later drain() — at most once a second — and reported as missed news.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <system_error>

#include <kagi/pg/options.hpp>
#include <kagi/store/data_store.hpp>

namespace kagi::store::detail {

// The channel every postgres DataStore notifies on.
inline constexpr std::string_view kChangeChannel = "kagi_data";

// A feed of the changed paths that start with `prefix` ("" for all). Null with `ec` and `why`
// set if the first connection fails.
std::unique_ptr<ChangeFeed> listen_for_changes(const pg::ConnectOptions& options,
                                               std::string prefix,
                                               std::chrono::milliseconds timeout,
                                               std::error_code& ec, std::string* why);

}  // namespace kagi::store::detail
