// tests/support/lockd_server.hpp — a real kagi-lockd process for one test.
//
//   auto lockd = kagi::test_support::LockdServer::start({"--set", "lockd.max_key_bytes=32"}, &why);
//   options.lockd.address = lockd->address();      // "127.0.0.1:<port the kernel chose>"
//   auto* one = kagi::test_support::LockdServer::shared(&why);   // one for the whole binary
//
// The binary is the one this build made (KAGI_LOCKD_BIN); it listens on 127.0.0.1:0 and a
// unix socket in a fresh folder, logs to <folder>/lockd.log, and is stopped with SIGTERM
// (SIGKILL after 5 s) when the object goes, by the process that started it only (a forked
// child exiting leaves it alone).
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef KAGI_LOCKD_BIN
#error "define KAGI_LOCKD_BIN as the path of the kagi-lockd binary"
#endif

namespace kagi::test_support {

class LockdServer {
 public:
  // The server of this process's tests, started on the first call (by the process that will
  // stop it: a test forks its workers after). Null, with the reason in `why`, if it cannot start.
  static LockdServer* shared(std::string* why) {
    static std::string failure;
    static std::unique_ptr<LockdServer> server = start({}, &failure);
    if (!server && why) *why = failure;
    return server.get();
  }

  // Started and listening, or null with the reason (and the server's log) in `why`. `tcp` is
  // its TCP address (another server's, to restart it where its clients are).
  static std::unique_ptr<LockdServer> start(const std::vector<std::string>& extra, std::string* why,
                                            const std::string& tcp = "127.0.0.1:0") {
    auto s = std::unique_ptr<LockdServer>(new LockdServer);
    char tmpl[] = "/tmp/kagi-lockd-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      *why = "mkdtemp failed";
      return nullptr;
    }
    s->dir_ = tmpl;
    s->unix_path_ = s->dir_ + "/lockd.sock";
    std::vector<std::string> args = {KAGI_LOCKD_BIN, "--listen", tcp, "--listen",
                                     "unix:" + s->unix_path_};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = s->dir_ + "/lockd.log";
    s->pid_ = ::fork();
    if (s->pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (!std::freopen(log.c_str(), "w", stderr)) ::_exit(126);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(log);
      std::string line;
      while (std::getline(in, line)) {
        const std::string mark = "kagi-lockd: listening on ";
        const size_t at = line.find(mark);
        if (at != std::string::npos && line.find("unix:") == std::string::npos) {
          s->address_ = line.substr(at + mark.size());
        }
      }
      if (!s->address_.empty()) return s;
      int status = 0;
      if (::waitpid(s->pid_, &status, WNOHANG) == s->pid_) {
        s->pid_ = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    *why = "kagi-lockd did not start (" + std::string(KAGI_LOCKD_BIN) + "): " + text.str();
    return nullptr;
  }

  ~LockdServer() {
    if (::getpid() != owner_) return;
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Stops it (SIGTERM; SIGKILL after 5 s); its exit status, or -1.
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return 128 + SIGKILL;
  }

  // The server's STATUS lines (one JSON object per key held or waited for), without "end";
  // read on its unix socket. {"(cannot read STATUS)"} if it does not answer.
  std::vector<std::string> status() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    unix_path_.copy(a.sun_path, sizeof a.sun_path - 1);
    timeval five{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    std::string text;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::write(fd, "STATUS\n", 7) == 7) {
      char buf[4096];
      while (text.size() < 4 || text.compare(text.size() - 4, 4, "end\n") != 0) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
      }
    }
    ::close(fd);
    if (text.size() < 4 || text.compare(text.size() - 4, 4, "end\n") != 0) {
      return {"(cannot read STATUS)"};
    }
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line) && line != "end";) lines.push_back(line);
    return lines;
  }
  // Requests queued for `key` (from STATUS).
  int waiters(const std::string& key) const {
    int n = 0;
    for (const std::string& line : status()) {
      if (line.rfind("{\"key\":\"" + key + "\"", 0) != 0) continue;
      for (size_t at = line.find("\"waiting_ms\""); at != std::string::npos;
           at = line.find("\"waiting_ms\"", at + 1)) {
        ++n;
      }
    }
    return n;
  }

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  std::string unix_address() const { return "unix:" + unix_path_; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(dir_ + "/lockd.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  LockdServer() : owner_(::getpid()) {}
  pid_t owner_;
  pid_t pid_ = 0;
  std::string dir_, unix_path_, address_;
};

}  // namespace kagi::test_support
