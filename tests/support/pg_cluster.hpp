// tests/support/pg_cluster.hpp — a real PostgreSQL server for one test or benchmark binary.
//
//   auto* pg = kagi::test_support::PgCluster::shared(&why);   // started on first use
//   options.postgres.dsn = pg->dsn();
//
// The server is Debian's, started by tests/support/pgcluster in a fresh folder under /tmp,
// and stopped when the binary exits (by the process that started it, not by a forked child).
// gtest binaries use tests/unit/support/pg_cluster.hpp, which adds KAGI_NEED_POSTGRES.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <kagi/pg/connection.hpp>

#ifndef KAGI_PGCLUSTER
#error "define KAGI_PGCLUSTER as the path of tests/support/pgcluster"
#endif

namespace kagi::test_support {

class PgCluster {
 public:
  // The cluster of this process, started on the first call. Null if it cannot start (the
  // reason in `why`).
  static PgCluster* shared(std::string* why) {
    static std::string failure;
    static std::unique_ptr<PgCluster> cluster = [] {
      auto c = std::unique_ptr<PgCluster>(new PgCluster);
      if (!c->start_first(&failure)) {
        c->owner_ = 0;  // not stopped, not removed: its logs say why
        c.reset();
      }
      return c;
    }();
    if (!cluster && why) *why = failure;
    return cluster.get();
  }
  ~PgCluster() {
    if (getpid() != owner_) return;  // a forked child exiting must not stop it
    run("stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Over the unix socket.
  std::string dsn() const {
    return "host=" + dir_ + " port=" + std::to_string(port_) + " dbname=postgres user=kagi";
  }
  // Over TCP on 127.0.0.1 (keepalives, tcp_user_timeout apply).
  std::string tcp_dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=postgres user=kagi";
  }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  // The first column of the first row `sql` returns ("" for none), on a connection of its own
  // (application_name "kagi-test": never counted as a kagi host). Throws std::runtime_error
  // with the server's reason if the statement fails.
  std::string value(const std::string& sql) const { return value_in(dsn(), sql); }
  // The same in the database `db_dsn` names (one from fresh_database_dsn()).
  static std::string value_in(const std::string& db_dsn, const std::string& sql) {
    using namespace std::chrono_literals;
    pg::ConnectOptions options;
    options.dsn = db_dsn;
    options.application_name = "kagi-test";
    std::error_code ec;
    std::string why;
    auto conn = pg::Connection::open(options, pg::Clock::now() + 10s, ec, &why);
    pg::Reply reply;
    if (!conn || conn->exec(sql, pg::Clock::now() + 10s, reply, &why)) {
      throw std::runtime_error(sql + ": " + why);
    }
    return reply.size() && reply[0].rows() ? std::string(reply[0].get(0, 0)) : "";
  }
  // A new empty database of this server, and the DSN that names it (unix socket): for a test
  // that must not see other tests' rows.
  std::string fresh_database_dsn() {
    const std::string name =
        "kagi_t" + std::to_string(::getpid()) + "_" + std::to_string(++databases_);
    value("CREATE DATABASE " + name);
    std::string out = dsn();
    return out.replace(out.find("dbname=postgres"), std::string("dbname=postgres").size(),
                       "dbname=" + name);
  }
  bool stop() { return run("stop"); }
  bool start() { return run("restart"); }  // the same port again

 private:
  PgCluster() : owner_(getpid()) {}

  bool start_first(std::string* why) {
    char tmpl[] = "/tmp/kagi-pg-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      *why = "mkdtemp failed";
      return false;
    }
    dir_ = tmpl;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all |
                                           std::filesystem::perms::group_exec |
                                           std::filesystem::perms::others_exec);
    port_ = free_port();
    if (!run("start", std::to_string(port_))) {
      *why = "tests/support/pgcluster could not start PostgreSQL (see " + dir_ +
             "/server.log and " + dir_ + "/pgcluster.log)";
      return false;
    }
    return true;
  }
  bool run(const std::string& command, const std::string& extra = "") {
    const std::string line =
        std::string(KAGI_PGCLUSTER) + " " + command + " " + dir_ + " " + extra + " >/dev/null";
    return std::system(line.c_str()) == 0;
  }
  static int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    close(fd);
    return port ? port : 54329;
  }

  pid_t owner_;
  int databases_ = 0;
  std::string dir_;
  int port_ = 0;
};

}  // namespace kagi::test_support
