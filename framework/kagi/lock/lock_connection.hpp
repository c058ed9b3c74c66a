// lock/lock_connection.hpp — for storage: run statements on the connection that holds a lock.
//
// With the postgres lock backend a request's locks are session advisory locks on one pooled
// connection. Data kept in the same database is committed on that connection, in one
// transaction: if the lock was lost, its connection is gone, and so is the commit. That is
// fencing by construction, with no extra round trip (store/pg_data_store.hpp).
//
//   std::error_code ec = lock::with_lock_connection(guard, [&](pg::Connection& conn) {
//     return conn.exec(sql, deadline, reply, &why);
//   });
#pragma once

#include <system_error>

#include <kagi/lock/guard.hpp>

namespace kagi::lock {

// Runs `work` on the database connection holding `guard`'s lock, with the session's other
// users kept out until it returns, and returns what `work` returned. Without running it:
// Errc::kReleased / kRevoked if the guard does not hold its lock; Errc::kFenceLost if the
// connection that held it is gone (the lock went with it); std::errc::operation_not_supported
// if the backend holds locks on no connection (`local`). A connection `work` leaves broken is
// dropped afterwards, and every lock of the request with it.
std::error_code with_lock_connection(const Guard& guard, const ConnectionWork& work);

}  // namespace kagi::lock
