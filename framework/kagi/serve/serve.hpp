// serve/serve.hpp — the main() of a kagi site: conf, front end, signals, graceful stop.
//
//   int main(int argc, char** argv) {
//     return kagi::serve(argc, argv, {guestbook::module()}, {.program = "guestbook"});
//   }
//
// serve() reads the command line
//
//   --conf FILE, --set section.key=value (repeatable)   the conf (config/config.hpp)
//   --http HOST:PORT                 the embedded HTTP front end
//   --fcgi unix:PATH | HOST:PORT     FastCGI for nginx / Apache
//   (neither)                        FastCGI on fd 0 when it is a socket (spawn-fcgi,
//                                    systemd socket activation), else HTTP on server.http
//   --print-config                   every key's value after loading, then exit
//   --help-conf                      every key of the framework and the modules, with its
//                                    type, default and meaning, then exit
//
// declares each module's conf section, loads the conf, builds the App, mounts the modules in
// order, and runs the front end(s) until SIGTERM or SIGINT. On the signal it runs the app's
// shutdown hooks (App::on_shutdown), stops accepting, lets requests in flight finish within
// server.shutdown_timeout_ms and returns.
//
// Returns the process exit code: 0 after a clean stop, 2 for a bad command line or conf,
// 1 when the site cannot start (address in use, unreadable templates, ...).
#pragma once

#include <string>
#include <vector>

#include <kagi/app/app_module.hpp>

namespace kagi {

struct ServeOptions {
  // The name in messages, the usage text and the log ("kagi-demo").
  std::string program = "kagi";
};

int serve(int argc, char** argv, const std::vector<AppModule>& modules,
          const ServeOptions& options = {});

}  // namespace kagi
