// kagi-demo: the sample site (BBS, chat, lock admin) on kagi's two front ends.
//
//   kagi-demo                          HTTP on server.http (127.0.0.1:8080), or FastCGI on
//                                      fd 0 when started by spawn-fcgi / systemd
//   kagi-demo --http 127.0.0.1:8080    the embedded HTTP front end
//   kagi-demo --fcgi unix:/run/kagi.sock   FastCGI for nginx / Apache (or HOST:PORT)
//   --conf FILE, --set section.key=value (repeatable), --print-config, --help-conf
//
// Everything but the list of apps (demo/site.hpp) is kagi::serve
// (framework/kagi/serve/serve.hpp), which gives the exit codes: 0 after a clean stop, 2 for
// a bad command line or conf, 1 when the site cannot start.
#include <kagi/serve/serve.hpp>

#include "demo/site.hpp"

int main(int argc, char** argv) {
  return kagi::serve(argc, argv, kagi::apps::demo_modules(), {.program = "kagi-demo"});
}
