#include <kagi/store/lock_domain_claim.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <kagi/util/log.hpp>
#include <kagi/util/random.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::store {
namespace {

constexpr const char* kFile = ".kagi-lock-domain";

std::error_code last_error() { return {errno, std::generic_category()}; }

// The recorded domain (without its newline); false if there is no record.
bool read_record(const std::string& path, std::string& out, std::error_code& ec) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno != ENOENT) ec = last_error();
    return false;
  }
  out.clear();
  char buf[1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ec = last_error();
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 64 * 1024) break;  // not ours: compared (and refused) as it is
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return true;
}

// Writes `domain` to a fresh temp file beside `path` and returns its name ("" on failure).
std::string write_temp(const std::string& dir, const std::string& domain, std::error_code& ec) {
  const std::string temp = dir + "/.kagi-lock-domain." + util::random_hex(8) + ".tmp";
  util::UniqueFd fd(
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    ec = last_error();
    return "";
  }
  const std::string line = domain + "\n";
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
      ::fsync(fd.get()) != 0) {
    ec = errno ? last_error() : std::make_error_code(std::errc::io_error);
    ::unlink(temp.c_str());
    return "";
  }
  return temp;
}

void sync_dir(const std::string& dir) {
  util::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

Status io_failure(std::error_code ec, const std::string& path, std::string_view step) {
  return Status::failed(ec, "lock domain", path, step);
}

}  // namespace

Status claim_lock_domain(const std::string& data_dir, const std::string& domain, bool adopt) {
  const std::string path = data_dir + "/" + kFile;
  std::error_code ec;
  std::string recorded;
  bool have = read_record(path, recorded, ec);
  if (ec) return io_failure(ec, path, "read");
  if (!have) {
    // A fresh folder: link() the record into place, which fails if another process got
    // there first (then that one's record is compared below).
    const std::string temp = write_temp(data_dir, domain, ec);
    if (temp.empty()) return io_failure(ec, path, "write");
    const bool linked = ::link(temp.c_str(), path.c_str()) == 0;
    const int link_errno = errno;
    ::unlink(temp.c_str());
    if (linked) {
      sync_dir(data_dir);
      return {};
    }
    if (link_errno != EEXIST)
      return io_failure({link_errno, std::generic_category()}, path, "link");
    have = read_record(path, recorded, ec);
    if (ec || !have)
      return io_failure(ec ? ec : std::make_error_code(std::errc::io_error), path, "read");
  }
  if (recorded == domain) return {};
  if (adopt) {
    const std::string temp = write_temp(data_dir, domain, ec);
    if (temp.empty()) return io_failure(ec, path, "write");
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      ec = last_error();
      ::unlink(temp.c_str());
      return io_failure(ec, path, "rename");
    }
    sync_dir(data_dir);
    util::log_warn("data.dir '" + data_dir + "' adopted by lock domain '" + domain +
                   "' (it was written under '" + recorded +
                   "'): data.adopt_lock_domain = true; set it back to false");
    return {};
  }
  return Status(make_error_code(Errc::kForeignLockDomain),
                foreign_lock_domain("data.dir '" + data_dir + "'", recorded, domain));
}

std::string foreign_lock_domain(const std::string& data, const std::string& recorded,
                                const std::string& domain) {
  return data + " is written by processes that lock in another domain: it records '" + recorded +
         "', this process locks in '" + domain +
         "'. Processes in two lock domains do not exclude each other and lose updates. Give "
         "every process that writes this data the same lock settings (several web hosts: "
         "locks.backend = \"postgres\", see docs/DEPLOY.md); to move the data to this domain "
         "on purpose, stop every other writer and start once with --set "
         "data.adopt_lock_domain=true";
}

}  // namespace kagi::store
