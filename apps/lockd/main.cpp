// kagi-lockd: the network lock server, wire-compatible with the classic "LOCK key" / "ok" /
// close-to-unlock clients (docs/LOCKD.md).
//
//   kagi-lockd [--listen HOST:PORT|unix:PATH]... [--conf FILE] [--set lockd.key=value]...
//
// With no --listen, the addresses of lockd.listen (127.0.0.1:1006 by default). SIGTERM or
// SIGINT: stops accepting, closes every connection (their locks go with them), exits 0.
// Exit codes: 0 after a stop, 1 if an address cannot be listened on, 2 for a bad command line
// or conf.
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <iostream>
#include <string>
#include <vector>

#include <kagi/lockd/options.hpp>
#include <kagi/lockd/server.hpp>
#include <kagi/serve/command_line.hpp>
#include <kagi/util/log.hpp>
#include <kagi/util/process.hpp>

namespace {

constexpr const char* kUsage =
    "usage: kagi-lockd [--listen HOST:PORT|[V6]:PORT|unix:PATH]... [--conf FILE]\n"
    "                  [--set lockd.key=value]...\n"
    "A lock server: a client sends \"LOCK <key>\" and holds the lock from the answer \"ok\"\n"
    "until it closes the connection (docs/LOCKD.md has the whole protocol). --listen is\n"
    "repeatable and replaces lockd.listen (default 127.0.0.1:1006). SIGTERM stops it.\n";

kagi::util::LogLevel log_level(const std::string& name) {
  using kagi::util::LogLevel;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

}  // namespace

int main(int argc, char** argv) {
  kagi::CommandLine args(argc, argv, "kagi-lockd", kUsage);
  std::vector<std::string> listen;
  while (args.next()) {
    if (args.take_conf_flags()) continue;
    if (args.is("--listen")) {
      listen.push_back(args.value());
    } else {
      args.refuse();
    }
  }
  kagi::config::Schema schema = kagi::config::Schema::framework();
  schema.add_section("lockd", kagi::lockd::conf_keys(), "kagi-lockd, the network lock server");
  // A site's kagi.toml may hold [lockd] beside its apps' sections: only ours are read.
  const kagi::Config conf = args.load_conf(schema, kagi::Config::OtherSections::kSkip);
  kagi::util::set_log_level(log_level(conf.get_string("log.level")));
  kagi::lockd::ServerOptions options;
  try {
    options = kagi::lockd::server_options(conf);
  } catch (const std::exception& e) {
    std::cerr << "kagi-lockd: " << e.what() << "\n";
    return 2;
  }
  if (!listen.empty()) options.listen = listen;

  ::signal(SIGPIPE, SIG_IGN);
  kagi::util::raise_open_file_limit("kagi-lockd");
  // One thread runs everything (the key table has no mutex): the hint lets Asio skip the
  // locking a multi-threaded io_context needs in its scheduler.
  boost::asio::io_context io(1);
  std::unique_ptr<kagi::lockd::Server> server;
  try {
    server = std::make_unique<kagi::lockd::Server>(io, options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "kagi-lockd: " << e.what() << "\n";
    return 2;
  }
  try {
    server->start();
  } catch (const std::exception& e) {
    std::cerr << "kagi-lockd: " << e.what() << "\n";
    return 1;
  }
  for (const std::string& address : server->addresses()) {
    kagi::util::log_info("kagi-lockd: listening on " + address);
  }
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    const kagi::lockd::ServerStats s = server->stats();
    kagi::util::log_info("kagi-lockd: signal " + std::to_string(signal) + ", stopping (" +
                         std::to_string(s.connections) + " connections, " +
                         std::to_string(s.holders) + " locks held, " + std::to_string(s.waiters) +
                         " waiting: all released)");
    server->stop();
  });
  io.run();
  kagi::util::log_info("kagi-lockd: stopped");
  return 0;
}
