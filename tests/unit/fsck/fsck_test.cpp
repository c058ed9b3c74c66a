#include "fsck/fsck.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include "../support/temp_dir.hpp"
#include "bbs/board.hpp"
#include "chat/room.hpp"

namespace kagi::apps::fsck {
namespace {

using test_support::TempDir;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void spit(const std::string& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

class FsckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lock::LockOptions lo;
    lo.dir = dir_.path() + "/locks";
    service_ = lock::LockService::create(lo);
    ctx_ = service_->context({"fsck-test", "", "", ""});
    std::error_code ec;
    data_ = store::DataDir::open({.dir = dir_.path() + "/data", .fsync = false}, ec);
    ASSERT_TRUE(data_) << ec.message();
  }
  std::string file(const std::string& rel) const { return dir_.path() + "/data/" + rel; }

  TempDir dir_;
  std::unique_ptr<lock::LockService> service_;
  std::unique_ptr<lock::LockContext> ctx_;
  std::unique_ptr<store::DataDir> data_;
};

TEST(AppLockForTest, MatchesTheLocksTheAppsTake) {
  EXPECT_EQ(app_lock_for(bbs::board_log_path("general")), bbs::board_lock_name("general"));
  EXPECT_EQ(app_lock_for(chat::room_log_path("lobby")), chat::room_lock_name("lobby"));
  EXPECT_EQ(app_lock_for("bbs/boards/a/b.log"), std::nullopt);
  EXPECT_EQ(app_lock_for("bbs/boards/.log"), std::nullopt);
  EXPECT_EQ(app_lock_for("other/x.log"), std::nullopt);
  EXPECT_EQ(app_lock_for("bbs/boards/x.txt"), std::nullopt);
}

TEST_F(FsckTest, ReportsDamageAndRepairsWithABackup) {
  const std::string path = bbs::board_log_path("general");
  std::vector<std::string> records;
  for (int i = 1; i <= 500; ++i) records.push_back("post " + std::to_string(i) + " hello");
  {
    auto g = ctx_->exclusive(bbs::board_lock_name("general"));
    ASSERT_TRUE(data_->rewrite_log(g, path, records).ok());
    ASSERT_TRUE(data_->rewrite_log(g, "clean.log", {"a", "b"}).ok());
    ASSERT_TRUE(data_->commit(g, "notes.txt", "not a log").ok());
  }
  std::string bytes = slurp(file(path));
  const size_t at = bytes.size() / 10;
  bytes[at] ^= 0x20;
  spit(file(path), bytes);

  std::vector<std::string> errors;
  std::vector<LogReport> logs = scan(dir_.path() + "/data", errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(logs.size(), 2u);  // notes.txt is not a log
  EXPECT_EQ(logs[0].path, path);
  EXPECT_EQ(logs[1].path, "clean.log");  // sorted: "b" < "c"
  EXPECT_FALSE(logs[1].damaged());
  ASSERT_EQ(logs[0].damage.size(), 1u);
  EXPECT_LE(logs[0].damage[0].offset, at);
  EXPECT_GT(logs[0].damage[0].offset + logs[0].damage[0].length, at);
  EXPECT_EQ(logs[0].records, records.size() - 1);
  EXPECT_EQ(logs[0].torn_tail, 0u);

  auto g = ctx_->exclusive(bbs::board_lock_name("general"));
  auto result = repair(*data_, g, path, "20261123T000000Z");
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result.value().kept, records.size() - 1);
  EXPECT_EQ(result.value().dropped, logs[0].damage[0].length);
  EXPECT_EQ(result.value().backup, path + ".bak-20261123T000000Z");
  EXPECT_EQ(slurp(file(result.value().backup)), bytes);  // byte for byte
  struct stat st {};
  ASSERT_EQ(::stat(file(result.value().backup).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // The repaired log holds every record but the damaged one.
  const std::vector<std::string> got = data_->read_log(g, path).value();
  ASSERT_EQ(got.size(), records.size() - 1);
  const auto lost = std::mismatch(got.begin(), got.end(), records.begin()).first - got.begin();
  std::vector<std::string> want = records;
  want.erase(want.begin() + lost);
  EXPECT_EQ(data_->read_log(g, path).value(), want);
  errors.clear();
  logs = scan(dir_.path() + "/data", errors);
  for (const auto& r : logs) EXPECT_FALSE(r.damaged()) << r.path;
  // A second repair finds nothing to do and writes no second backup.
  auto again = repair(*data_, g, path, "20261123T000001Z");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again.value().backup.empty());
  EXPECT_FALSE(std::filesystem::exists(file(path + ".bak-20261123T000001Z")));
}

}  // namespace
}  // namespace kagi::apps::fsck
