// store/detail/file_io.hpp — whole-buffer reads and writes through store::FileSystem, and the
// conversion of its -errno results into error codes.
//
// FileSystem reports failure as a negative errno (see store/fs.hpp); these helpers keep that
// convention and add the loops every caller would otherwise write again (short writes, EINTR).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <kagi/store/fs.hpp>

namespace kagi::store::detail {

// A FileSystem failure (-errno) as an error code of the system category.
inline std::error_code sys_error(long negative_errno) {
  return {static_cast<int>(-negative_errno), std::system_category()};
}

// Writes all of `data` at the fd's offset (with pwrite at `offset` if offset >= 0). Returns 0
// or -errno; a write that makes no progress counts as -EIO.
long write_all(FileSystem& fs, int fd, std::string_view data, off_t offset);

// Reads from `offset` to the end of `fd` into `out`. `size`: the file's size if the caller has
// just stat'ed it (else fstat asks). Reading stops there: every caller holds the file's lock, so
// nothing grows it meanwhile (a commit replaces files, it never extends an open one). Returns 0
// or -errno.
long read_from(FileSystem& fs, int fd, off_t offset, std::string& out,
               std::optional<off_t> size = std::nullopt);

// The 8 bytes at `p` as stored (a frame header, compared as a whole, never decoded).
inline uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace kagi::store::detail
