#include <kagi/util/secret.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <kagi/util/random.hpp>
#include <kagi/util/sha256.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::util {
namespace {

constexpr size_t kHexChars = 64;  // the file holds the 32 bytes as hex, and a newline

std::runtime_error secret_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(what + " '" + path + "': " + std::strerror(err) +
                            " (the folder must exist and be writable by the server's user)");
}

// Writes a fresh secret beside `path` and links it into place unless a file is there
// already (another process won the race, or an earlier start made it).
void create(const std::string& path) {
  const std::string tmp = path + ".new." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) throw secret_error("cannot create the server secret", tmp, errno);
  const std::string text = random_hex(32) + "\n";
  const bool written =
      ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int write_errno = errno;
  const bool synced = written && ::fsync(fd.get()) == 0;
  const int sync_errno = errno;
  fd.reset();  // closed before it is published or removed
  if (!synced) {
    ::unlink(tmp.c_str());
    throw secret_error("cannot write the server secret", tmp, written ? sync_errno : write_errno);
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST) {
    throw secret_error("cannot publish the server secret", path, link_errno);
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Secret Secret::load_or_create(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) {
    create(path);
    fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }
  if (!fd) throw secret_error("cannot read the server secret", path, errno);
  struct stat st {};
  ::fstat(fd.get(), &st);
  char text[kHexChars + 2];
  const ssize_t n = ::read(fd.get(), text, sizeof text);
  if ((st.st_mode & 077) != 0) {
    throw std::runtime_error("the server secret '" + path +
                             "' is readable by other users: run chmod 600 on it");
  }
  std::array<char, 32> key{};
  bool ok = n == static_cast<ssize_t>(kHexChars) ||
            (n == static_cast<ssize_t>(kHexChars + 1) && text[kHexChars] == '\n');
  for (size_t i = 0; ok && i < 32; ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    key[i] = static_cast<char>(hi * 16 + lo);
  }
  if (!ok) {
    throw std::runtime_error("the server secret '" + path +
                             "' is not 64 lowercase hex characters: delete it and kagi makes a "
                             "new one at the next start");
  }
  return Secret(key);
}

Secret Secret::from_bytes(std::string_view bytes) {
  if (bytes.size() != 32) throw std::invalid_argument("a server secret is 32 bytes");
  std::array<char, 32> key{};
  std::memcpy(key.data(), bytes.data(), 32);
  return Secret(key);
}

std::string Secret::tag(std::string_view domain, std::string_view message, size_t bytes) const {
  std::string input;
  input.reserve(domain.size() + 1 + message.size());
  input.append(domain).push_back('\0');
  input.append(message);
  return to_hex(hmac_.sign(input), bytes);
}

}  // namespace kagi::util
