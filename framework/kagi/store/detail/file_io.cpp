#include <kagi/store/detail/file_io.hpp>

#include <sys/stat.h>

#include <cerrno>

namespace kagi::store::detail {

long write_all(FileSystem& fs, int fd, std::string_view data, off_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = offset < 0 ? fs.write(fd, data.data() + done, data.size() - done)
                           : fs.pwrite(fd, data.data() + done, data.size() - done,
                                       offset + static_cast<off_t>(done));
    if (n == -EINTR) continue;
    if (n < 0) return n;
    if (n == 0) return -EIO;  // no progress on a regular file: treat as an I/O error
    done += static_cast<size_t>(n);
  }
  return 0;
}

long read_from(FileSystem& fs, int fd, off_t offset, std::string& out, std::optional<off_t> size) {
  if (!size) {
    struct stat st {};
    if (int r = fs.fstat(fd, &st); r < 0) return r;
    size = st.st_size;
  }
  out.assign(*size > offset ? static_cast<size_t>(*size - offset) : 0, '\0');
  size_t have = 0;
  while (have < out.size()) {
    ssize_t n =
        fs.pread(fd, out.data() + have, out.size() - have, offset + static_cast<off_t>(have));
    if (n == -EINTR) continue;
    if (n < 0) return n;
    if (n == 0) break;  // shorter than stat said: keep what is there
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return 0;
}

}  // namespace kagi::store::detail
