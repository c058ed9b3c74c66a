// What a group commit round reads to decide on a syncfs: Dirty + Writeback from /proc/meminfo.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include <kagi/store/detail/dirty_pages.hpp>

namespace kagi::store::detail {
namespace {

TEST(DirtyPagesTest, AddsDirtyAndWritebackInBytes) {
  const std::string meminfo =
      "MemTotal:        4012345 kB\n"
      "Dirty:              120 kB\n"
      "Writeback:            8 kB\n"
      "WritebackTmp:      9999 kB\n"
      "NFS_Writeback:     7777 kB\n";
  EXPECT_EQ(parse_meminfo_dirty(meminfo), (120 + 8) * 1024);
}

TEST(DirtyPagesTest, TakesOnlyWholeKeysAtTheStartOfALine) {
  // "WritebackTmp" comes first here, and "Dirty" appears inside another key.
  const std::string meminfo =
      "WritebackTmp:      9999 kB\n"
      "SwapDirty:         5555 kB\n"
      "Dirty:                1 kB\n"
      "Writeback:            2 kB\n";
  EXPECT_EQ(parse_meminfo_dirty(meminfo), 3 * 1024);
}

TEST(DirtyPagesTest, AMissingOrMalformedLineIsAnError) {
  for (const std::string& bad : {
           std::string("Dirty: 1 kB\n"),                                      // no Writeback
           std::string("Writeback: 1 kB\n"),                                  // no Dirty
           std::string("Dirty: x kB\nWriteback: 1 kB\n"),                     // not a number
           std::string("Dirty: -1 kB\nWriteback: 1 kB\n"),                    // negative
           std::string("Dirty: 1 MB\nWriteback: 1 kB\n"),                     // another unit
           std::string("Dirty: 1\nWriteback: 1 kB\n"),                        // no unit
           std::string("Dirty 1 kB\nWriteback: 1 kB\n"),                      // no colon
           std::string("Dirty: 99999999999999999999 kB\nWriteback: 1 kB\n"),  // too large
           std::string(""),
       }) {
    EXPECT_EQ(parse_meminfo_dirty(bad), -EINVAL) << bad;
  }
}

TEST(DirtyPagesTest, ReadsThisMachinesMeminfo) { EXPECT_GE(read_meminfo_dirty(), 0); }

}  // namespace
}  // namespace kagi::store::detail
