#include <kagi/app/lock_conf.hpp>

namespace kagi {

lock::LockOptions lock_options(const Config& conf) {
  lock::LockOptions options;
  options.backend = conf.get_string("locks.backend");
  options.dir = conf.get_string("locks.dir");
  options.timeout = std::chrono::milliseconds(conf.get_int("locks.timeout_ms"));
  options.order_check_fail = conf.get_string("locks.order_check") == "fail";
  options.max_hold = std::chrono::milliseconds(conf.get_int("locks.max_hold_ms"));
  options.postgres.dsn = conf.get_string("locks.postgres.dsn");
  options.postgres.application_name = conf.get_string("locks.postgres.application_name");
  options.postgres.keepalives_idle_s =
      static_cast<int>(conf.get_int("locks.postgres.keepalives_idle_s"));
  options.postgres.keepalives_interval_s =
      static_cast<int>(conf.get_int("locks.postgres.keepalives_interval_s"));
  options.postgres.keepalives_count =
      static_cast<int>(conf.get_int("locks.postgres.keepalives_count"));
  options.postgres.tcp_user_timeout_ms =
      static_cast<int>(conf.get_int("locks.postgres.tcp_user_timeout_ms"));
  options.postgres_pool = static_cast<size_t>(conf.get_int("locks.postgres.pool"));
  options.lockd.address = conf.get_string("locks.lockd.address");
  options.lockd.pool = static_cast<size_t>(conf.get_int("locks.lockd.pool"));
  options.lockd.secret_file = conf.get_string("locks.lockd.secret_file");
  options.lockd.keepalive_idle_s = static_cast<int>(conf.get_int("locks.lockd.keepalive_idle_s"));
  options.lockd.keepalive_interval_s =
      static_cast<int>(conf.get_int("locks.lockd.keepalive_interval_s"));
  options.lockd.keepalive_count = static_cast<int>(conf.get_int("locks.lockd.keepalive_count"));
  options.lockd.user_timeout_ms = static_cast<int>(conf.get_int("locks.lockd.user_timeout_ms"));
  return options;
}

}  // namespace kagi
