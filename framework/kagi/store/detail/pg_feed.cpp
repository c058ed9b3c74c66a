#include <kagi/store/detail/pg_feed.hpp>

#include <utility>

#include <kagi/pg/connection.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store::detail {
namespace {

class PgFeed final : public ChangeFeed {
 public:
  PgFeed(pg::ConnectOptions options, std::string prefix, std::chrono::milliseconds timeout)
      : options_(std::move(options)), prefix_(std::move(prefix)), timeout_(timeout) {}

  // Connects and LISTENs; false (with the reason) if it could not.
  bool connect(std::error_code& ec, std::string* why) {
    last_attempt_ = pg::Clock::now();
    const auto deadline = last_attempt_ + timeout_;
    conn_ = pg::Connection::open(options_, deadline, ec, why);
    if (!conn_) return false;
    pg::Reply reply;
    ec = conn_->exec("LISTEN " + std::string(kChangeChannel), deadline, reply, why);
    if (ec) conn_.reset();
    return !ec;
  }

  int fd() const override { return conn_ ? conn_->socket() : -1; }

  bool drain(std::vector<std::string>& changed) override {
    if (!conn_ || conn_->broken()) {
      if (pg::Clock::now() - last_attempt_ < std::chrono::seconds(1)) return false;
      std::error_code ec;
      std::string why;
      if (!connect(ec, &why)) {
        util::log_warn("data change feed: cannot LISTEN again: " + why);
      }
      return false;  // whatever was said while we were away is missed
    }
    payloads_.clear();
    const bool ok = conn_->take_notifications(payloads_);
    for (std::string& path : payloads_) {
      if (path.starts_with(prefix_)) changed.push_back(std::move(path));
    }
    return ok;
  }

 private:
  const pg::ConnectOptions options_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
  // Used by the one thread that drains the feed.
  std::unique_ptr<pg::Connection> conn_;
  pg::Clock::time_point last_attempt_;
  std::vector<std::string> payloads_;
};

}  // namespace

std::unique_ptr<ChangeFeed> listen_for_changes(const pg::ConnectOptions& options,
                                               std::string prefix,
                                               std::chrono::milliseconds timeout,
                                               std::error_code& ec, std::string* why) {
  auto feed = std::make_unique<PgFeed>(options, std::move(prefix), timeout);
  if (!feed->connect(ec, why)) return nullptr;
  return feed;
}

}  // namespace kagi::store::detail
