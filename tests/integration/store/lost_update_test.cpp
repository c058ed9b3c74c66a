// The lost-update demonstration (docs/LOST_UPDATES.md): one post list, 32 concurrent
// clients each adding posts, run twice with the same load.
//
//   naive   — the seeds' order: read the file without a lock, (slow request), then take the
//             lock only around the write. Two clients read the same list; the later write
//             drops the earlier one's post.
//   guarded — kagi's order: lock → read → modify → commit → unlock.
//
// Lost updates = posts sent − posts in the final list. The test prints both counts and
// asserts naive > 0 and guarded == 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>

namespace kagi::store {
namespace {

namespace fs = std::filesystem;

constexpr int kClients = 32;
constexpr int kPostsPerClient = 20;
constexpr const char* kLock = "bbs/board/1";
constexpr const char* kFile = "bbs/1.dat";  // one post per line
// Models the time a request spends between reading and writing (parsing the form, rendering).
constexpr auto kThinkTime = std::chrono::microseconds(300);

class LostUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kagi-lost-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    lock::LockOptions options;
    options.dir = (root_ / "locks").string();
    options.timeout = std::chrono::seconds(30);  // the guarded run queues 32 clients on one lock
    service_ = lock::LockService::create(options);
    std::error_code ec;
    // fsync off: the demonstration is about ordering, not durability, and stays fast.
    data_ = DataDir::open(DataOptions{.dir = (root_ / "data").string(), .fsync = false}, ec);
    ASSERT_TRUE(data_) << ec.message();
  }
  void TearDown() override {
    data_.reset();
    service_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<lock::LockContext> request(int client) {
    lock::HolderInfo who;
    who.request_id = "client-" + std::to_string(client);
    who.method = "POST";
    who.path = "/bbs/1/post";
    return service_->context(who);
  }

  // Runs `post(client, n)` for every client and post concurrently; returns the lost count.
  template <typename Post>
  long run(Post post) {
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        for (int n = 0; n < kPostsPerClient; ++n) post(c, n);
      });
    }
    for (auto& t : clients) t.join();
    auto ctx = request(-1);
    auto board = ctx->shared(kLock);
    const std::string list = data_->read(board, kFile).value();
    const long stored = std::count(list.begin(), list.end(), '\n');
    return long{kClients} * kPostsPerClient - stored;
  }

  fs::path root_;
  std::unique_ptr<lock::LockService> service_;
  std::unique_ptr<DataDir> data_;
};

std::string post_line(int client, int n) {
  return "client " + std::to_string(client) + " post " + std::to_string(n) + "\n";
}

// The seeds' bug, written the only way kagi lets it be written: the read bypasses DataDir
// (which would demand a guard) with a plain open/read, and the lock covers the write only.
std::string read_without_lock(const fs::path& file) {
  std::string bytes;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) bytes.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return bytes;
}

TEST_F(LostUpdateTest, NaiveOrderLosesUpdatesGuardedOrderLosesNone) {
  const fs::path file = root_ / "data" / kFile;

  const long naive_lost = run([&](int client, int n) {
    auto ctx = request(client);
    std::string list = read_without_lock(file);  // read, unlocked
    std::this_thread::sleep_for(kThinkTime);
    list += post_line(client, n);
    auto board = ctx->exclusive(kLock);  // lock only around the write
    data_->commit(board, kFile, list).check();
  });

  {
    auto ctx = request(-1);
    auto board = ctx->exclusive(kLock);
    ASSERT_TRUE(data_->remove(board, kFile).ok());
  }

  const long guarded_lost = run([&](int client, int n) {
    auto ctx = request(client);
    auto board = ctx->exclusive(kLock);                    // 1. lock
    std::string list = data_->read(board, kFile).value();  // 2. read
    std::this_thread::sleep_for(kThinkTime);
    list += post_line(client, n);               // 3. modify
    data_->commit(board, kFile, list).check();  // 4. commit
  });                                           // 5. unlock (guard leaves scope)

  std::printf("lost updates, %d clients x %d posts = %d posts sent:\n", kClients, kPostsPerClient,
              kClients * kPostsPerClient);
  std::printf("  naive   (read unlocked, lock the write): %ld lost\n", naive_lost);
  std::printf("  guarded (lock, read, modify, commit):    %ld lost\n", guarded_lost);
  EXPECT_GT(naive_lost, 0) << "the naive order should lose updates under this load";
  EXPECT_EQ(guarded_lost, 0);
}

}  // namespace
}  // namespace kagi::store
