// kagi-demo: the sample site (BBS, chat, lock admin) on kagi's two front ends.
//
//   kagi-demo                          HTTP on server.http (127.0.0.1:8080), or FastCGI on
//                                      fd 0 when started by spawn-fcgi / systemd
//   kagi-demo --http 127.0.0.1:8080    the embedded HTTP front end
//   kagi-demo --fcgi unix:/run/kagi.sock   FastCGI for nginx / Apache (or HOST:PORT)
//   --conf FILE, --set section.key=value (repeatable), --print-config
//
// Exit codes: 0 after a clean stop (SIGTERM / SIGINT), 2 for a bad command line or config,
// 1 when the server cannot start.
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <kagi/app/app.hpp>
#include <kagi/fcgi/fcgi_server.hpp>
#include <kagi/server/http_server.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/memory.hpp>
#include "demo/home.hpp"
#include "testing/test_routes.hpp"
#ifdef KAGI_HAVE_APP_bbs
#include "bbs/bbs.hpp"
#endif
#ifdef KAGI_HAVE_APP_chat
#include "chat/chat.hpp"
#endif
#ifdef KAGI_HAVE_APP_admin
#include "admin/admin.hpp"
#endif

namespace {

struct Options {
  std::optional<std::string> conf_file;
  std::vector<std::string> overrides;
  std::optional<std::string> http;
  std::optional<std::string> fcgi;
  bool print_config = false;
};

constexpr const char* kUsage =
    "usage: kagi-demo [--conf FILE] [--set section.key=value]... [--http HOST:PORT]\n"
    "                 [--fcgi unix:PATH|HOST:PORT] [--print-config]\n"
    "With neither --http nor --fcgi: FastCGI on fd 0 if it is a socket (spawn-fcgi,\n"
    "systemd), else HTTP on server.http.\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "kagi-demo: " << message << "\n" << kUsage;
  std::exit(2);
}

Options parse_args(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--conf") {
      options.conf_file = value();
    } else if (arg == "--set") {
      options.overrides.push_back(value());
    } else if (arg == "--http") {
      options.http = value();
    } else if (arg == "--fcgi") {
      options.fcgi = value();
    } else if (arg == "--print-config") {
      options.print_config = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      usage_error("unknown argument '" + arg + "'");
    }
  }
  return options;
}

// Every connection (web server, parked long-poll, idle keep-alive) costs a descriptor, and
// the soft limit systemd and shells give (often 1024) is far below the hard one: raise it,
// so a busy site runs out of descriptors at the hard limit (LimitNOFILE= in
// conf/systemd/kagi.service), not at a default nobody chose. Logged either way, so the
// limit in force is in the log.
void raise_open_file_limit() {
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
  std::string line = "kagi-demo: open files limit " + text(lim.rlim_cur);
  if (lim.rlim_cur != before) line += " (raised from " + text(before) + ")";
  if (lim.rlim_cur < 4096) line += "; low for a busy site: raise LimitNOFILE= / ulimit -Hn";
  kagi::util::log_info(line);
}

bool fd0_is_socket() {
  struct stat st {};
  return fstat(0, &st) == 0 && S_ISSOCK(st.st_mode);
}

bool systemd_socket() {
  const char* fds = std::getenv("LISTEN_FDS");
  return fds && std::string(fds) == "1";
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse_args(argc, argv);
  kagi::Config conf;
  try {
    conf = kagi::Config::load(options.conf_file, options.overrides);
  } catch (const kagi::ConfigError& e) {
    std::cerr << "kagi-demo: " << e.what() << "\n";
    return 2;
  }
  if (options.print_config) {
    std::cout << conf.dump();
    return 0;
  }

  // SIGPIPE: a client that went away is an error value on write, not a process kill.
  // SIGTERM / SIGINT: blocked in every thread and taken by a watcher thread that stops the
  // servers gracefully.
  signal(SIGPIPE, SIG_IGN);
  // Request-sized blocks stay in the heap between requests (util/memory.hpp).
  kagi::util::tune_malloc_for_requests();
  raise_open_file_limit();
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    kagi::App app(conf);
    kagi::apps::mount_home(app);
    if (conf.get_bool("test.routes")) kagi::apps::mount_test_routes(app);
#ifdef KAGI_HAVE_APP_bbs
    kagi::apps::mount_bbs(app);
#endif
#ifdef KAGI_HAVE_APP_chat
    kagi::apps::mount_chat(app);
#endif
#ifdef KAGI_HAVE_APP_admin
    kagi::apps::mount_admin(app);
#endif

    const int threads = static_cast<int>(conf.get_int("server.threads"));
    const auto shutdown = std::chrono::milliseconds(conf.get_int("server.shutdown_timeout_ms"));
    std::unique_ptr<kagi::FcgiServer> fcgi;
    std::unique_ptr<kagi::HttpServer> http;
    if (options.fcgi || (!options.http && (fd0_is_socket() || systemd_socket()))) {
      kagi::FcgiOptions fo;
      fo.listen = options.fcgi.value_or("");
      fo.threads = threads;
      fo.socket_mode =
          static_cast<unsigned>(std::stoul(conf.get_string("server.socket_mode"), nullptr, 8));
      fo.shutdown_timeout = shutdown;
      fo.read_timeout = std::chrono::milliseconds(conf.get_int("limits.fcgi_read_timeout_ms"));
      fo.body_timeout = std::chrono::milliseconds(conf.get_int("limits.body_timeout_ms"));
      fcgi = std::make_unique<kagi::FcgiServer>(app, fo);
    }
    if (options.http || !fcgi) {
      kagi::HttpOptions ho;
      ho.listen = options.http.value_or(conf.get_string("server.http"));
      ho.threads = threads;
      ho.shutdown_timeout = shutdown;
      ho.max_connections = static_cast<size_t>(conf.get_int("server.max_connections"));
      http = std::make_unique<kagi::HttpServer>(app, ho);
      kagi::util::log_info("kagi-demo: HTTP on http://" + ho.listen + "/");
    }
    if (fcgi) kagi::util::log_info("kagi-demo: FastCGI on " + options.fcgi.value_or("fd 0"));

    std::thread watcher([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      kagi::util::log_info("kagi-demo: signal " + std::to_string(sig) + ", stopping");
      app.shutdown();  // answers parked long-polls, so they do not hold up the stop
      if (fcgi) fcgi->stop();
      if (http) http->stop();
    });
    watcher.detach();  // it exits with the process; run() returns after stop()

    std::thread http_thread;
    if (http && fcgi) http_thread = std::thread([&] { http->run(); });
    if (fcgi) {
      fcgi->run();
    } else {
      http->run();
    }
    if (http_thread.joinable()) http_thread.join();
  } catch (const kagi::ConfigError& e) {
    std::cerr << "kagi-demo: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kagi-demo: cannot start: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
