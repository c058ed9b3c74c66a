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
  options.dir_lease = std::chrono::milliseconds(conf.get_int("locks.dir_lease_ms"));
  options.dir_host_id = conf.get_string("locks.dir_host_id");
  options.dir_max_clock_skew =
      std::chrono::milliseconds(conf.get_int("locks.dir_max_clock_skew_ms"));
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

offline::StateOptions offline_state_options(const Config& conf) {
  offline::StateOptions options;
  options.dir = conf.get_string("data.dir");
  options.fsync = conf.get_string("data.fsync") == "always";
  options.group_readable = conf.get_bool("data.group_readable");
  if (conf.get_string("data.backend") == "postgres") {
    const lock::LockOptions locks = lock_options(conf);
    options.backend = "postgres";
    options.postgres = locks.postgres;  // keepalives and application_name as the locks'
    const std::string dsn = conf.get_string("data.postgres.dsn");
    options.postgres.dsn = dsn.empty() ? locks.postgres.dsn : dsn;
  }
  return options;
}

offline::SessionOptions session_options(const Config& conf) {
  return {.idle = std::chrono::seconds(conf.get_int("session.idle_s")),
          .max_sessions = static_cast<size_t>(conf.get_int("session.max_sessions")),
          .touch_interval = std::chrono::seconds(60)};
}

offline::ManagerOptions offline_lock_options(const Config& conf) {
  return {.min_ttl = std::chrono::seconds(1),
          .max_ttl = std::chrono::seconds(conf.get_int("offline.max_ttl_s")),
          .max_per_owner = static_cast<size_t>(conf.get_int("session.max_offline_locks")),
          .sweep_interval = std::chrono::seconds(conf.get_int("offline.sweep_interval_s"))};
}

}  // namespace kagi
