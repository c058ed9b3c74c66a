#include <kagi/serve/serve.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <kagi/app/app.hpp>
#include <kagi/fcgi/fcgi_server.hpp>
#include <kagi/serve/command_line.hpp>
#include <kagi/server/http_server.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/memory.hpp>
#include <kagi/util/process.hpp>

namespace kagi {
namespace {

std::string usage_for(const std::string& program) {
  const std::string pad(program.size(), ' ');
  return "usage: " + program + " [--conf FILE] [--set section.key=value]... [--http HOST:PORT]\n" +
         "       " + pad + " [--fcgi unix:PATH|HOST:PORT] [--print-config] [--help-conf]\n" +
         "With neither --http nor --fcgi: FastCGI on fd 0 if it is a socket (spawn-fcgi,\n"
         "systemd), else HTTP on server.http. --help-conf lists every conf key.\n";
}

struct FrontEndChoice {
  std::optional<std::string> http;
  std::optional<std::string> fcgi;
};

bool fd0_is_socket() {
  struct stat st {};
  return fstat(0, &st) == 0 && S_ISSOCK(st.st_mode);
}

bool systemd_socket() {
  const char* fds = std::getenv("LISTEN_FDS");
  return fds && std::string(fds) == "1";
}

std::unique_ptr<FcgiServer> make_fcgi(App& app, const Config& conf, const FrontEndChoice& choice) {
  if (!choice.fcgi && (choice.http || !(fd0_is_socket() || systemd_socket()))) return nullptr;
  FcgiOptions fo;
  fo.listen = choice.fcgi.value_or("");
  fo.threads = static_cast<int>(conf.get_int("server.threads"));
  fo.socket_mode =
      static_cast<unsigned>(std::stoul(conf.get_string("server.socket_mode"), nullptr, 8));
  fo.shutdown_timeout = std::chrono::milliseconds(conf.get_int("server.shutdown_timeout_ms"));
  fo.read_timeout = std::chrono::milliseconds(conf.get_int("limits.fcgi_read_timeout_ms"));
  fo.body_timeout = std::chrono::milliseconds(conf.get_int("limits.body_timeout_ms"));
  return std::make_unique<FcgiServer>(app, fo);
}

std::unique_ptr<HttpServer> make_http(App& app, const Config& conf, const FrontEndChoice& choice,
                                      bool have_fcgi, const std::string& program) {
  if (!choice.http && have_fcgi) return nullptr;
  HttpOptions ho;
  ho.listen = choice.http.value_or(conf.get_string("server.http"));
  ho.threads = static_cast<int>(conf.get_int("server.threads"));
  ho.shutdown_timeout = std::chrono::milliseconds(conf.get_int("server.shutdown_timeout_ms"));
  ho.max_connections = static_cast<size_t>(conf.get_int("server.max_connections"));
  ho.idle_timeout = std::chrono::milliseconds(conf.get_int("server.idle_timeout_ms"));
  auto server = std::make_unique<HttpServer>(app, ho);
  util::log_info(program + ": HTTP on http://" + ho.listen + "/");
  return server;
}

}  // namespace

int serve(int argc, char** argv, const std::vector<AppModule>& modules,
          const ServeOptions& options) {
  const std::string& program = options.program;
  CommandLine args(argc, argv, program, usage_for(program));
  FrontEndChoice choice;
  bool print_config = false, help_conf = false;
  while (args.next()) {
    if (args.take_conf_flags()) continue;
    if (args.is("--http")) {
      choice.http = args.value();
    } else if (args.is("--fcgi")) {
      choice.fcgi = args.value();
    } else if (args.is("--print-config")) {
      print_config = true;
    } else if (args.is("--help-conf")) {
      help_conf = true;
    } else {
      args.refuse();
    }
  }
  config::Schema schema;
  try {
    schema = schema_for(modules);
  } catch (const std::logic_error& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return 2;
  }
  if (help_conf) {
    std::cout << schema.describe();
    return 0;
  }
  const Config conf = args.load_conf(std::move(schema));
  if (print_config) {
    std::cout << conf.dump();
    return 0;
  }

  // SIGPIPE: a client that went away is an error value on write, not a process kill.
  // SIGTERM / SIGINT / SIGHUP / SIGQUIT (what a terminal, a web host's control panel or a
  // supervisor sends to end a process; the CGI scripts of old trapped the same four): blocked
  // in every thread (the servers' threads inherit the mask) and taken by a watcher thread that
  // stops the servers gracefully, so the requests in flight finish and every lock is released
  // on the way out (a dir lock otherwise stays until its lease runs out).
  signal(SIGPIPE, SIG_IGN);
  // Request-sized blocks stay in the heap between requests (util/memory.hpp).
  util::tune_malloc_for_requests();
  util::raise_open_file_limit(program);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  sigaddset(&stop_signals, SIGQUIT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    App app(conf);
    for (const auto& module : modules) {
      if (module.mount) module.mount(app);
    }
    std::unique_ptr<FcgiServer> fcgi = make_fcgi(app, conf, choice);
    std::unique_ptr<HttpServer> http = make_http(app, conf, choice, fcgi != nullptr, program);
    if (fcgi) util::log_info(program + ": FastCGI on " + choice.fcgi.value_or("fd 0"));

    std::thread watcher([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      util::log_info(program + ": signal " + std::to_string(sig) + ", stopping");
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
  } catch (const ConfigError& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": cannot start: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace kagi
