#include <kagi/lock/detail/backend.hpp>

#include <stdexcept>

#include <kagi/lock/errors.hpp>
#include <kagi/pg/options.hpp>

namespace kagi::lock {

std::error_code Session::acquire_set(std::span<SetEntry>, Clock::time_point) {
  // LockContext takes a set name by name unless takes_sets_at_once() says otherwise.
  return std::make_error_code(std::errc::operation_not_supported);
}

std::error_code Session::with_connection(void*, const ConnectionWork&) {
  return std::make_error_code(std::errc::operation_not_supported);  // no connection holds it
}

void check_dir_options(const LockOptions& options) {
  if (options.dir_lease < std::chrono::milliseconds(100)) {
    throw std::invalid_argument("locks.dir_lease_ms must be at least 100 (got " +
                                std::to_string(options.dir_lease.count()) + ")");
  }
  if (options.dir_max_clock_skew.count() < 0) {
    throw std::invalid_argument("locks.dir_max_clock_skew_ms must not be negative");
  }
  const std::string& id = options.dir_host_id;
  bool ok = id.empty() || (id[0] != '.' && id.size() <= 64);
  for (char c : id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.');
  }
  if (!ok) {
    throw std::invalid_argument("locks.dir_host_id = '" + id +
                                "': use up to 64 letters, digits, '-', '_' and '.', not first "
                                "(it names files)");
  }
}

std::unique_ptr<Backend> make_backend(const LockOptions& options) {
  if (options.backend == "local") return make_local_backend(options);
  if (options.backend == "postgres") {
    if (options.postgres.dsn.empty()) {
      throw std::invalid_argument(
          "locks.backend = \"postgres\" needs locks.postgres.dsn: a libpq connection string "
          "such as \"host=db1 dbname=site user=kagi\" (see docs/DEPLOY.md)");
    }
    std::string why;
    if (pg::check_dsn(options.postgres.dsn, &why)) {
      throw std::invalid_argument("locks.postgres.dsn does not parse: " + why);
    }
    if (options.postgres_pool == 0) {
      throw std::invalid_argument("locks.postgres.pool must be at least 1");
    }
    return make_postgres_backend(options);
  }
  if (options.backend == "dir") {
    check_dir_options(options);
    return make_dir_backend(options);
  }
  if (options.backend == "lockd") return make_lockd_backend(options);
  throw std::invalid_argument("locks.backend = '" + options.backend +
                              "' is not a lock backend; use \"local\", \"postgres\", \"dir\" "
                              "or \"lockd\"");
}

}  // namespace kagi::lock
