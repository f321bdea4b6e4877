// SPDX-License-Identifier: MIT
// What an all-to-all figure is compared with (docs/mori-a2a.md "References"): the best copy of the same bytes
// into the same destinations, all ranks at once, measured twice; and the physical limit from device facts.
#include "references.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm::detail {
namespace {

constexpr int kCeilingGraphK = 16;

std::string fmt_gbps(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.0f", v);
  return b;
}

}  // namespace

Ceiling measure_ceiling(Timer& t, const A2aLayout& L, const std::vector<PushSpec>& sm_copies, int world) {
  const double bytes = static_cast<double>(world) * static_cast<double>(world) * static_cast<double>(L.chunk);
  struct Candidate {
    std::string kind;
    std::function<void()> one;
    int blocks_per_peer = 0, unroll = 0;
    std::string source_cache;
  };
  std::vector<Candidate> cands;
  if (t.eng.copy_kind() != "host_memcpy")
    for (const PushSpec& s : sm_copies)
      cands.push_back({"sm_copy", [&t, &L, &s] { t.eng.push(L, s); }, s.blocks_per_peer, s.unroll,
                       s.source_evict_first ? "evict_first" : "normal"});
  cands.push_back({t.eng.copy_kind(), [&] { t.eng.copy_peers(L); }, 0, 0, ""});
  Ceiling c;
  const int saved_k = t.graph_k;
  t.graph_k = kCeilingGraphK;
  for (int round = 1; round <= 2; ++round)
    for (const auto& cand : cands)
      for (bool graph : {false, true}) {
        if (graph && t.eng.copy_kind() == "host_memcpy") continue;  // the host runtime has no graphs
        const double p50 =
            t.p50(graph ? Launch::graph : Launch::stream, cand.one, "a2a.ceiling." + cand.kind);
        c.samples.push_back({cand.kind, graph, round, p50 > 0 ? bytes / p50 / 1e3 : 0, cand.blocks_per_peer,
                             cand.unroll, cand.source_cache});
      }
  t.graph_k = saved_k;
  const CeilingSample* best = nullptr;
  for (const auto& s : c.samples)
    if (s.gbps > c.gbps) {
      c.gbps = s.gbps;
      c.kind = s.kind;
      c.graph = s.graph;
      best = &s;
    }
  double lo = 0, hi = 0;
  for (const auto& s : c.samples)
    if (best && s.kind == best->kind && s.graph == best->graph &&
        s.blocks_per_peer == best->blocks_per_peer && s.unroll == best->unroll &&
        s.source_cache == best->source_cache) {
      lo = lo == 0 ? s.gbps : std::min(lo, s.gbps);
      hi = std::max(hi, s.gbps);
    }
  c.spread = hi > 0 ? (hi - lo) / hi : 0;
  return c;
}

PhysicalLimit physical_limit(const DevicePlacement& pl, const DeviceInfo& d, std::uint64_t chunk,
                             std::uint64_t pitch) {
  PhysicalLimit p;
  if (pl.host_runtime) {
    p.source = "host runtime: no device limit applies";
    return p;
  }
  const double w = pl.world;
  const double hbm = 2.0 * static_cast<double>(d.memory_clock_khz) * 1e3 * d.memory_bus_bits / 8 / 1e9;
  if (hbm <= 0) {
    p.source = "memory clock or bus width not reported by the device";
    return p;
  }
  const std::string hbm_src = "HBM " + fmt_gbps(hbm) + " GB/s (2 x " +
                              std::to_string(d.memory_clock_khz / 1000) + " MHz x " +
                              std::to_string(d.memory_bus_bits) + "-bit bus, read at run time)";
  p.l2_resident = a2a_working_set_fits_l2(pl.all_one_device ? pl.world : 1, pl.world, pitch, d.l2_bytes);
  if (pl.all_one_device) {
    // Every byte is read once and written once in the same HBM.
    p.gbps = hbm / 2;
    p.source = hbm_src + "; every byte read and written once: total <= HBM / 2";
  } else if (pl.one_rank_per_device) {
    // Per device: 2 w c bytes through HBM and (w - 1) c bytes out over the links.
    const double c = static_cast<double>(chunk);
    double t = 2 * w * c / (hbm * 1e9);
    std::string src = hbm_src;
    if (pl.link_gbps > 0) {
      t = std::max(t, (w - 1) * c / (pl.link_gbps * 1e9));
      src += "; " + pl.link_source;
    } else {
      src += "; NVLink rate not known here (" + pl.link_source + "), so this bound is HBM alone";
    }
    p.gbps = w * w * c / t / 1e9;
    p.source = src;
  } else {
    p.source = "ranks spread unevenly over devices: no single limit computed";
  }
  return p;
}

}  // namespace mori::symm::detail
