// SPDX-License-Identifier: MIT
// The words of the health checks, shared by the verdicts (health.cpp) and the expectations
// (expectations.cpp). Private to lib/src/health/.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include "mori/symm/health/health.hpp"

namespace mori::symm::detail {

// A measured value in a check's words: 3 significant digits, one decimal from 100 up.
inline std::string health_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), std::fabs(v) >= 100 ? "%.1f" : "%.3g", v);
  return buf;
}

// "0->1 ptr": a row of the peer matrix as a check's subject.
inline std::string pair_name(const PairFact& r) {
  return std::to_string(r.src) + "->" + std::to_string(r.dst) + " " + r.addressing;
}

}  // namespace mori::symm::detail
