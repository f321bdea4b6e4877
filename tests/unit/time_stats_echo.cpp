// SPDX-License-Identifier: MIT
// The C++ timing statistics (comm/stats.hpp) of the numbers given as arguments, as one JSON line with every
// double printed to round-trip: the reference the Python side (scripts/compare_lib/stats.py) is held to by
// tests/scripts/compare_test.py, so that neither side carries a copy of the other's formula.
//   time-stats-echo 1 2 3.5    ->  {"max":3.5,"mean":...,"min":1,"p50":2,"p95":...,"samples":3}
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mori/symm/comm/stats.hpp"

int main(int argc, char** argv) {
  std::vector<double> us;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(argv[i], &end);
    if (end == argv[i] || *end != '\0' || errno != 0) {
      std::fprintf(stderr, "time-stats-echo: '%s' is not a number\n", argv[i]);
      return 2;
    }
    us.push_back(v);
  }
  const mori::symm::TimeStats t = mori::symm::time_stats(us);
  std::printf("{\"max\":%.17g,\"mean\":%.17g,\"min\":%.17g,\"p50\":%.17g,\"p95\":%.17g,\"samples\":%d}\n",
              t.max, t.mean, t.min, t.p50, t.p95, t.samples);
  return 0;
}
