// offline/detail/state_backends.hpp — the two StateStores (offline/state_store.hpp).
#pragma once

#include <memory>
#include <string>

#include <kagi/offline/state_store.hpp>

namespace kagi::offline::detail {

std::unique_ptr<StateStore> open_sqlite_state(const StateOptions& options, std::string* why);
std::unique_ptr<StateStore> open_pg_state(const StateOptions& options, std::string* why);

// Thrown by a Transaction's calls; StateStore::transaction turns it into its Status.
struct TransactionFailure {
  store::Status status;
};

}  // namespace kagi::offline::detail
