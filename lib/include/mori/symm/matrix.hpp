// Peer matrix (mori-probe --matrix): for ordered pairs of ranks of one load/store team, through a real
// symmetric window: write and read bandwidth at a large size, and one-way put-with-signal latency (p50 of
// round trips / 2), with pointer-array and LSA addressing. GPU: kernels/matrix.hip; host runtime: the same
// algorithm in C++ with atomics.
#pragma once

#include <cstddef>
#include <vector>

#include "mori/symm/json.hpp"
#include "mori/symm/runtime.hpp"

namespace mori::symm {

class Bootstrap;

struct MatrixOptions {
  std::size_t bytes = 64u << 20;  // per bandwidth transfer
  int iterations = 5;             // timed transfers per direction (median)
  int rounds = 1000;              // ping-pong round trips
  int pairs = 0;                  // 0 = every ordered pair, else a fixed sample of that many
};

// The ordered pairs (src, dst) of one team that the matrix measures: all, or `sample` of them chosen by a
// fixed seed (the same on every rank), sorted.
std::vector<std::pair<int, int>> matrix_pairs(const Bootstrap& boot, int sample);

// Collective. Returns {bytes, iterations, rounds, rows: [{src, dst, addressing, write_gbps, read_gbps,
// copy_engine_write_gbps (GPU, ptr rows: the copy engine's write of the same bytes; else null),
// latency_us_p50, link_gbps[, link_reason]}]} on every rank. A ping-pong that exceeded its bound leaves null
// values and status "timeout"; *timed_out is then true.
Json peer_matrix(Bootstrap& boot, Runtime& rt, int device, HandleType ht, const MatrixOptions& o,
                 bool* timed_out);

}  // namespace mori::symm
