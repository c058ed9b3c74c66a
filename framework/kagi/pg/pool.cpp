#include <kagi/pg/pool.hpp>

#include <kagi/pg/errors.hpp>

namespace kagi::pg {
namespace {

util::BoundedPoolOptions bounds(const PoolOptions& o) {
  return {.max = o.max,
          .retry_after_failure = o.retry_after_failure,
          .check_idle_after = o.check_idle_after,
          .broken_closes_idle = true};
}

}  // namespace

Pool::Pool(PoolOptions options)
    : options_(std::move(options)),
      pool_(
          bounds(options_),
          [this](Clock::time_point deadline, std::error_code& ec, std::string* why) {
            auto conn = Connection::open(options_.connect, deadline, ec, why);
            if (conn && options_.on_connect) options_.on_connect(*conn, deadline);
            if (conn && conn->broken()) {
              conn.reset();
              ec = make_error_code(Errc::kUnavailable);
              if (why) *why = "PostgreSQL: the connection broke while it was being prepared";
            }
            return conn;
          },
          [this](std::string* why) {
            if (why) {
              *why = "all " + std::to_string(options_.max) +
                     " PostgreSQL connections of this process are in use (raise the pool size, "
                     "or serve with fewer threads)";
            }
            return make_error_code(Errc::kPoolExhausted);
          }) {}

Pool::~Pool() = default;

}  // namespace kagi::pg
