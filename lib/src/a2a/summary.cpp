// SPDX-License-Identifier: MIT
// The main job's conclusion per chunk (lib/include/mori/symm/a2a/summary.hpp).
#include "mori/symm/a2a/summary.hpp"

#include <algorithm>
#include <cstdio>

#include "mori/symm/a2a/row.hpp"

namespace mori::symm {

int default_graph_iters(const A2aConfig& c, bool host_runtime) {
  if (host_runtime) return 0;
  if (std::find(c.syncs.begin(), c.syncs.end(), SyncMode::device) == c.syncs.end()) return 0;
  const bool copy = std::find(c.protocols.begin(), c.protocols.end(), Protocol::copy) != c.protocols.end();
  if (copy && c.verify_epochs % 2 != 0) return 0;
  return kDefaultGraphIters;
}

namespace {
bool verified(const A2aResult& r) {
  return r.wrong == 0 && r.time_us.p50 > 0;
}
}  // namespace

std::vector<A2aBest> a2a_best_modes(const std::vector<A2aResult>& rows) {
  std::vector<std::size_t> chunks;
  for (const auto& r : rows)
    if (std::find(chunks.begin(), chunks.end(), r.chunk_bytes) == chunks.end())
      chunks.push_back(r.chunk_bytes);
  std::vector<A2aBest> out;
  for (std::size_t chunk : chunks) {
    const A2aResult* best = nullptr;
    const A2aResult* host = nullptr;
    for (const auto& r : rows) {
      if (r.chunk_bytes != chunk || !verified(r)) continue;
      if (!best || r.time_us.p50 < best->time_us.p50) best = &r;
      if (r.sync == SyncMode::host && (!host || r.time_us.p50 < host->time_us.p50)) host = &r;
    }
    if (!best) continue;
    A2aBest b;
    b.chunk_bytes = chunk;
    b.mode = a2a_mode(*best);
    b.addressing = best->addressing;
    b.sync = best->sync;
    b.protocol = best->protocol;
    b.graph_iters = best->graph ? best->graph_iters : 0;
    b.p50_us = best->time_us.p50;
    b.ceiling_ratio = a2a_ceiling_ratio(*best);
    if (host) {
      b.host_p50_us = host->time_us.p50;
      b.gain_over_host = host->time_us.p50 / best->time_us.p50;
    }
    out.push_back(b);
  }
  return out;
}

std::string format_best(const A2aBest& b) {
  char buf[256];
  char gain[96] = "no host-sync row";
  if (b.gain_over_host)
    std::snprintf(gain, sizeof(gain), "%.2fx host sync (%.2f us)", *b.gain_over_host, *b.host_p50_us);
  char ceil[32] = "no ceiling";
  if (b.ceiling_ratio > 0) std::snprintf(ceil, sizeof(ceil), "%.1f%% of ceiling", 100.0 * b.ceiling_ratio);
  std::snprintf(buf, sizeof(buf), "best  chunk %zu B: %s  %.2f us  %s  %s", b.chunk_bytes, b.mode.c_str(),
                b.p50_us, ceil, gain);
  return buf;
}

Json to_json(const A2aBest& b) {
  return {{"chunk_bytes", b.chunk_bytes},
          {"mode", b.mode},
          {"addressing", to_string(b.addressing)},
          {"sync", to_string(b.sync)},
          {"protocol", b.sync == SyncMode::device ? Json(to_string(b.protocol)) : Json(nullptr)},
          {"graph_iters", b.graph_iters},
          {"p50_us", b.p50_us},
          {"ceiling_ratio", b.ceiling_ratio},
          {"host_p50_us", b.host_p50_us ? Json(*b.host_p50_us) : Json(nullptr)},
          {"gain_over_host", b.gain_over_host ? Json(*b.gain_over_host) : Json(nullptr)}};
}

}  // namespace mori::symm
