// tests/support/lockd_server.hpp — a real kagi-lockd process for one test.
//
//   auto lockd = kagi::test_support::LockdServer::start({"--set", "lockd.max_key_bytes=32"}, &why);
//   options.lockd.address = lockd->address();      // "127.0.0.1:<port the kernel chose>"
//
// The binary is the one this build made (KAGI_LOCKD_BIN); it listens on 127.0.0.1:0 and a
// unix socket in a fresh folder, logs to <folder>/lockd.log, and is stopped with SIGTERM
// (SIGKILL after 5 s) when the object goes, by the process that started it only (a forked
// child exiting leaves it alone).
#pragma once

#include <signal.h>
#include <stdlib.h>
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
  // Started and listening, or null with the reason (and the server's log) in `why`.
  static std::unique_ptr<LockdServer> start(const std::vector<std::string>& extra,
                                            std::string* why) {
    auto s = std::unique_ptr<LockdServer>(new LockdServer);
    char tmpl[] = "/tmp/kagi-lockd-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      *why = "mkdtemp failed";
      return nullptr;
    }
    s->dir_ = tmpl;
    s->unix_path_ = s->dir_ + "/lockd.sock";
    std::vector<std::string> args = {KAGI_LOCKD_BIN, "--listen", "127.0.0.1:0", "--listen",
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
