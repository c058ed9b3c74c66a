// fuzz/fuzz_check.hpp — FUZZ_CHECK(cond): an invariant of a fuzz target. A violation prints
// the condition and aborts, which libFuzzer reports as a crash and saves as an artifact.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (false)
