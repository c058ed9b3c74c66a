#include <kagi/lock/lock_domain.hpp>

#include <libpq-fe.h>

#include <filesystem>
#include <system_error>

#include <kagi/lock/detail/dir_lock.hpp>

#include <kagi/pg/options.hpp>
#include <kagi/util/endpoint.hpp>
#include <kagi/util/process.hpp>

namespace kagi::lock {
namespace {

// host, port and dbname of a DSN as libpq would connect: the DSN's values, else the
// environment's and libpq's defaults (PQconndefaults), so "dbname=site" and
// "postgresql:///site" name the same database.
std::string database_of(const std::string& dsn) {
  std::string host, port, dbname, user;
  pg::DsnSettings settings;
  if (!pg::parse_dsn(dsn, settings, nullptr)) {
    for (const auto& [key, value] : settings) {
      if (key == "host" || (key == "hostaddr" && host.empty())) host = value;
      if (key == "port") port = value;
      if (key == "dbname") dbname = value;
      if (key == "user") user = value;
    }
  }
  if (PQconninfoOption* defaults = PQconndefaults()) {
    for (PQconninfoOption* o = defaults; o->keyword; ++o) {
      if (!o->val) continue;
      const std::string key = o->keyword;
      if (key == "host" && host.empty()) host = o->val;
      if (key == "port" && port.empty()) port = o->val;
      if (key == "user" && user.empty()) user = o->val;
      if (key == "dbname" && dbname.empty()) dbname = o->val;
    }
    PQconninfoFree(defaults);
  }
  if (dbname.empty()) dbname = user;  // libpq's rule: the database defaults to the user's name
  return "host=" + host + " port=" + port + " dbname=" + dbname;
}

// One kagi-lockd server: its address, and the host's name too when that address means "this
// host" (loopback, a unix socket), which two web hosts would each resolve to a server of
// their own.
std::string lockd_domain(const LockdOptions& options) {
  util::Endpoint ep;
  const bool parsed = util::parse_endpoint(options.address, ep, nullptr);
  if (parsed && !ep.is_unix && !util::is_loopback(ep.sockaddr_ptr())) {
    return "lockd address=" + options.address;
  }
  return "lockd host=" + util::host_name() + " address=" + options.address;
}

}  // namespace

std::string lock_domain(const LockOptions& options) {
  if (options.backend == "postgres") return "postgres " + database_of(options.postgres.dsn);
  if (options.backend == "dir") {
    // Hosts mount the shared folder under paths of their own: the folder names itself.
    std::error_code ec;
    const std::string id = dirlock::domain_id(options.dir + "/dirlocks", ec);
    if (ec) {
      throw std::system_error(
          ec, "cannot read or make the lock domain id in '" + options.dir + "/dirlocks/.domain'");
    }
    return "dir id=" + id;
  }
  if (options.backend == "lockd") return lockd_domain(options.lockd);
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::weakly_canonical(options.dir, ec);
  if (ec) dir = std::filesystem::absolute(options.dir, ec);
  return options.backend + " host=" + util::host_name() + " dir=" + dir.string();
}

}  // namespace kagi::lock
