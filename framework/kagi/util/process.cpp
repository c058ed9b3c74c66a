#include <kagi/util/process.hpp>

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

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

}  // namespace kagi::util
