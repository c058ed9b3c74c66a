#include <kagi/util/process.hpp>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include <kagi/util/log.hpp>

namespace kagi::util {
namespace {

std::atomic<pid_t> g_pid{0};
std::atomic<uint64_t> g_generation{1};
std::once_flag g_registered;

void on_fork_child() {
  g_pid.store(::getpid(), std::memory_order_relaxed);
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

void ensure_registered() {
  std::call_once(g_registered, [] {
    g_pid.store(::getpid(), std::memory_order_relaxed);
    ::pthread_atfork(nullptr, nullptr, &on_fork_child);
  });
}

}  // namespace

pid_t current_pid() {
  ensure_registered();
  return g_pid.load(std::memory_order_relaxed);
}

uint64_t fork_generation() {
  ensure_registered();
  return g_generation.load(std::memory_order_relaxed);
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

// Every connection (web server, parked long-poll, idle keep-alive, a lock server's client) costs
// a descriptor, and the soft limit systemd and shells give (often 1024) is far below the hard
// one: raise it, so a busy server runs out of descriptors at the hard limit (LimitNOFILE= in
// its systemd unit), not at a default nobody chose. Logged either way, so the limit in force
// is in the log.
void raise_open_file_limit(const std::string& program) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = before;
  }
  auto text = [](rlim_t n) {
    return n == RLIM_INFINITY ? std::string("unlimited") : std::to_string(n);
  };
  std::string line = program + ": open files limit " + text(lim.rlim_cur);
  if (lim.rlim_cur != before) line += " (raised from " + text(before) + ")";
  if (lim.rlim_cur < 4096) line += "; low for a busy site: raise LimitNOFILE= / ulimit -Hn";
  log_info(line);
}

}  // namespace kagi::util
