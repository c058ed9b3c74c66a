// Kill-at-random-moments test of the storage layer's crash safety.
//
// A child process loops { commit state.dat (seq n); append n to acks.log; ack n through a
// pipe } and is SIGKILLed at a random moment (timed against its progress, see below),
// 1,000 times. After each kill:
//   - state.dat parses as exactly one version (self-checking: header with seq, length and
//     checksum of a seq-dependent body), never a mix;
//   - acks.log holds exactly the records 1..m in order with m >= the last acknowledged seq
//     and >= what it held after the previous kill (a record is never lost) and at most one
//     more than that (the unacknowledged tail);
//   - state.dat's seq is m or m + 1 (the commit of m + 1 may precede its append).
// The next child continues from the log, so every kill also exercises recovery at open.
// Children alternate between data.fsync "always" and "never": against a killed process (as
// opposed to a power loss) both policies promise the same, and halving the fsyncs keeps the
// test well under a minute on a busy disk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include <kagi/lock/lock_context.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/data_dir.hpp>
#include <kagi/store/detail/crc32c.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store {
namespace {

namespace fs = std::filesystem;

// A version of state.dat: "seq <n> len <body bytes> crc <crc32c of body>\n" + body.
std::string make_state(uint64_t seq) {
  std::string body;
  const size_t length = 64 + (seq * 7919) % 12000;  // sizes vary so a mix shows
  body.reserve(length);
  for (size_t i = 0; i < length; ++i) body.push_back(static_cast<char>('a' + (seq + i) % 26));
  char header[96];
  std::snprintf(header, sizeof header, "seq %llu len %zu crc %08x\n",
                static_cast<unsigned long long>(seq), body.size(), detail::crc32c(0, body));
  return header + body;
}

// The seq of a well-formed version, or -1 if `bytes` is not exactly one version.
long long parse_state(const std::string& bytes) {
  unsigned long long seq = 0;
  size_t length = 0;
  unsigned crc = 0;
  int used = 0;
  if (std::sscanf(bytes.c_str(), "seq %llu len %zu crc %08x\n%n", &seq, &length, &crc, &used) !=
          3 ||
      used <= 0) {
    return -1;
  }
  std::string_view body = std::string_view(bytes).substr(static_cast<size_t>(used));
  if (body.size() != length || detail::crc32c(0, body) != crc) return -1;
  if (make_state(seq) != bytes) return -1;
  return static_cast<long long>(seq);
}

struct Locks {
  std::unique_ptr<lock::LockService> service;
  std::unique_ptr<lock::LockContext> ctx;
};

Locks make_locks(const fs::path& dir) {
  lock::LockOptions options;
  options.dir = dir.string();
  Locks locks;
  locks.service = lock::LockService::create(options);
  lock::HolderInfo who;
  who.request_id = "crash-test";
  locks.ctx = locks.service->context(who);
  return locks;
}

[[noreturn]] void child_main(const fs::path& root, int ack_fd, bool fsync) {
  std::error_code ec;
  auto data = DataDir::open(DataOptions{.dir = (root / "data").string(), .fsync = fsync}, ec);
  if (!data) ::_exit(10);
  Locks locks = make_locks(root / "locks");
  auto guard = locks.ctx->exclusive("crash/state");
  const uint64_t ready = 0;  // tells the parent the child is past start-up
  if (::write(ack_fd, &ready, sizeof ready) != sizeof ready) ::_exit(15);
  auto log = data->read_log(guard, "acks.log");
  if (!log.ok()) ::_exit(11);
  uint64_t seq = log->empty() ? 1 : std::stoull(log->back()) + 1;
  for (;; ++seq) {
    if (!data->commit(guard, "state.dat", make_state(seq)).ok()) ::_exit(12);
    if (!data->append(guard, "acks.log", std::to_string(seq)).ok()) ::_exit(13);
    if (::write(ack_fd, &seq, sizeof seq) != sizeof seq) ::_exit(14);
  }
}

// Waits until `fd` has an ack to read or `deadline` passes; reads it. False on timeout/EOF.
bool read_ack(int fd, uint64_t* seq, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    return ::read(fd, seq, sizeof *seq) == sizeof *seq;
  }
}

std::string slurp(const fs::path& p) {
  std::string out;
  if (FILE* f = std::fopen(p.c_str(), "rb")) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

TEST(CrashTest, SigkillAtRandomMomentsLeavesOldOrNewAndNoAcknowledgedRecordLost) {
  const int kills =
      std::getenv("KAGI_CRASH_KILLS") ? std::atoi(std::getenv("KAGI_CRASH_KILLS")) : 1000;
  const unsigned seed = std::random_device{}();
  std::printf("crash test: %d kills, seed %u\n", kills, seed);
  std::fflush(stdout);  // before fork(): a child must not inherit unflushed output
  util::set_log_level(util::LogLevel::kError);  // one cleanup line per kill is noise here
  std::mt19937 rng(seed);
  // Where a kill lands. fsync times vary a lot between machines (0.3 ms on an idle disk,
  // 10 ms on a busy one), so kills are timed against the child's progress, not the clock
  // alone: one in ten lands during start-up (0-1 ms after fork: open, temp cleanup, log
  // recovery); the others wait for the child to be ready, then for 0 or 1 acks, then a
  // random fraction of one observed loop (commit + append + ack) — a uniformly random point
  // inside a commit or an append.
  std::uniform_int_distribution<int> startup_delay_us(0, 1000);
  std::uniform_real_distribution<double> fraction(0.0, 1.0);
  double loop_us[2] = {2000, 2000};  // moving average of a loop, per fsync policy
  constexpr auto kWaitLimit = std::chrono::seconds(20);  // a child that stalls this long fails

  char tmpl[] = "/tmp/kagi-crash-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path root = tmpl;
  fs::create_directories(root / "data");
  struct RemoveAtEnd {  // also when an ASSERT returns early
    fs::path dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_at_end{root};

  uint64_t acked = 0;                 // highest seq any child acknowledged
  uint64_t seen = 0;                  // records the log held after the previous kill
  uint64_t killed_mid_run = 0;        // kills after the child's first acknowledgement
  uint64_t killed_mid_commit = 0;     // kills that left a temp file behind
  uint64_t killed_before_append = 0;  // kills between a commit and its append (state ahead)
  long long last_state = -1;          // the state's seq and ...
  uint64_t last_m = 0;                // ... the log's length after the previous kill
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kills; ++i) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(fds[0]);
      child_main(root, fds[1], /*fsync=*/i % 2 == 0);
    }
    ::close(fds[1]);
    uint64_t seq = 0;
    uint64_t acks_now = 0;
    auto take_ack = [&] {
      if (seq == 0) return;  // the ready marker
      ASSERT_GT(seq, acked) << "acks must increase";
      acked = seq;
      ++acks_now;
    };
    if (i % 10 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(startup_delay_us(rng)));
    } else {
      const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
      ASSERT_TRUE(read_ack(fds[0], &seq, deadline)) << "kill " << i << ": child never got ready";
      ASSERT_EQ(seq, 0u);
      auto last = std::chrono::steady_clock::now();
      for (int wait = static_cast<int>(rng() % 2); wait > 0; --wait) {
        ASSERT_TRUE(read_ack(fds[0], &seq, deadline)) << "kill " << i << ": no progress";
        take_ack();
        auto now = std::chrono::steady_clock::now();
        loop_us[i % 2] = 0.8 * loop_us[i % 2] +
                         0.2 * std::chrono::duration<double, std::micro>(now - last).count();
        last = now;
      }
      std::this_thread::sleep_for(
          std::chrono::microseconds(static_cast<long>(fraction(rng) * loop_us[i % 2])));
    }
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "kill " << i << ": the child ended by itself (status " << status
        << "): a store or lock call failed";
    ASSERT_EQ(::fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
    while (::read(fds[0], &seq, sizeof seq) == sizeof seq) take_ack();
    ::close(fds[0]);
    if (acks_now > 0) ++killed_mid_run;

    // The log: exactly 1..m, m in [acked, acked + 1]. Read it the way a reader would (a fresh
    // DataDir under a shared guard), which also proves a torn tail is skipped.
    std::error_code ec;
    auto data = DataDir::open(DataOptions{.dir = (root / "data").string(), .fsync = true}, ec);
    ASSERT_TRUE(data) << ec.message();
    if (data->cleaned_temp_files() > 0) ++killed_mid_commit;
    Locks locks = make_locks(root / "locks");
    auto guard = locks.ctx->shared("crash/state");
    auto log = data->read_log(guard, "acks.log");
    ASSERT_TRUE(log.ok()) << log.status().message();
    for (size_t r = 0; r < log->size(); ++r) {
      ASSERT_EQ((*log)[r], std::to_string(r + 1)) << "kill " << i << ": record " << r;
    }
    // Records an earlier child appended without acknowledging stay too, so the floor is
    // whatever was acknowledged or already seen; this child adds at most one unacknowledged.
    const uint64_t m = log->size();
    const uint64_t floor = std::max(acked, seen);
    ASSERT_GE(m, floor) << "kill " << i << ": an acknowledged record was lost";
    ASSERT_LE(m, floor + 1) << "kill " << i;
    seen = m;

    // The state: one whole version, m or m + 1 (or none yet).
    const std::string state = slurp(root / "data" / "state.dat");
    if (state.empty() && m == 0) continue;
    const long long s = parse_state(state);
    ASSERT_GE(s, 0) << "kill " << i << ": state.dat is torn (" << state.size() << " bytes)";
    ASSERT_TRUE(static_cast<uint64_t>(s) == m || static_cast<uint64_t>(s) == m + 1)
        << "kill " << i << ": state seq " << s << ", log has " << m;
    // Counted only when this child moved the state (a child killed before its first commit
    // leaves the previous kill's state and log as they were).
    if (static_cast<uint64_t>(s) == m + 1 && (s != last_state || m != last_m)) {
      ++killed_before_append;
    }
    last_state = s;
    last_m = m;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf(
      "crash test: %d kills in %.1f s; %llu records acknowledged; %llu kills hit a child "
      "after its first acknowledgement, %llu left a temp file (killed mid-commit), %llu "
      "landed between a commit and its append\n",
      kills, seconds, static_cast<unsigned long long>(acked),
      static_cast<unsigned long long>(killed_mid_run),
      static_cast<unsigned long long>(killed_mid_commit),
      static_cast<unsigned long long>(killed_before_append));
  EXPECT_GT(acked, 0u) << "no child ever got a commit through: the test proved nothing";
  // The checks above only mean something if kills landed inside the windows they guard: at
  // least 1 kill in 200 must have hit a commit half-done (a temp file left), as many must
  // have come between a commit and its append, and 1 in 4 must have hit a child that had
  // acknowledged a record (typical runs: ~35%, ~40% and ~55%). A run with fewer kills, set
  // through KAGI_CRASH_KILLS for a quick look, is not held to this.
  if (kills >= 200) {
    EXPECT_GE(killed_mid_commit, static_cast<uint64_t>(kills / 200))
        << "too few kills landed mid-commit: the kill timing misses the commit";
    EXPECT_GE(killed_before_append, static_cast<uint64_t>(kills / 200))
        << "too few kills landed between a commit and its append";
    EXPECT_GE(killed_mid_run, static_cast<uint64_t>(kills / 4))
        << "too few kills hit a child that had made progress";
  }

  // Leftover temp files of the killed children are removed by the next open.
  std::error_code ec;
  auto data = DataDir::open(DataOptions{.dir = (root / "data").string(), .fsync = true}, ec);
  ASSERT_TRUE(data);
  for (const auto& e : fs::recursive_directory_iterator(root / "data")) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".kagi-tmp-")) << e.path();
  }
}

}  // namespace
}  // namespace kagi::store
