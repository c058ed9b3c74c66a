// booking: a kagi site with one app. kagi::serve does the rest: --conf/--set, FastCGI or
// HTTP, signals and a graceful stop (run `booking --help`).
// [tutorial:main]
#include <kagi/serve/serve.hpp>

#include "booking.hpp"

int main(int argc, char** argv) {
  return kagi::serve(argc, argv, {booking::module()}, {.program = "booking"});
}
// [end]
