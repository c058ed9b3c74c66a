#include <kagi/store/detail/dirty_pages.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>

namespace kagi::store::detail {

namespace {

// The kB value of the line "<key>: <n> kB" in `text`, or -1.
int64_t field_kb(std::string_view text, std::string_view key) {
  size_t p = std::string_view::npos;
  for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
    const size_t after = at + key.size();
    // A whole key at the start of a line ("Writeback:", not "WritebackTmp:" or "NFS_Writeback").
    if ((at == 0 || text[at - 1] == '\n') && after < text.size() && text[after] == ':') {
      p = after + 1;
      break;
    }
  }
  if (p == std::string_view::npos) return -1;
  while (p < text.size() && text[p] == ' ') ++p;
  int64_t kb = -1;
  const auto [end, ec] = std::from_chars(text.data() + p, text.data() + text.size(), kb);
  if (ec != std::errc{} || kb < 0 || kb > (INT64_MAX >> 11)) return -1;  // the sum in bytes fits
  const std::string_view unit = text.substr(static_cast<size_t>(end - text.data()));
  if (!unit.starts_with(" kB")) return -1;
  return kb;
}

}  // namespace

int64_t parse_meminfo_dirty(std::string_view meminfo) {
  const int64_t dirty = field_kb(meminfo, "Dirty");
  const int64_t writeback = field_kb(meminfo, "Writeback");
  if (dirty < 0 || writeback < 0) return -EINVAL;
  return (dirty + writeback) << 10;
}

int64_t read_meminfo_dirty() {
  const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  char buf[8192];  // the file is about 1.5 KiB; Dirty and Writeback are in its first third
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return -err;
  return parse_meminfo_dirty(std::string_view(buf, static_cast<size_t>(n)));
}

}  // namespace kagi::store::detail
