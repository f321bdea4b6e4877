// SPDX-License-Identifier: MIT
// What mori-a2a's main job concludes (docs/mori-a2a.md "The best mode"): the graph length it measures by
// default, and, per chunk size, the fastest verified mode with its share of the same-run ceiling and its gain
// over host sync. Pure functions over A2aConfig and result rows.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/base/json.hpp"

namespace mori::symm {

// --graph when not given: device sync replayed in a graph is the mode the fast path exists for, so a GPU run
// that measures device sync also measures it in a graph of this many iterations (even, so that the copy
// protocol fits: docs/mori-a2a.md "Synchronisation and protocols").
inline constexpr int kDefaultGraphIters = 16;

// The graph length of a run whose --graph was not given: kDefaultGraphIters on a GPU runtime where c.syncs
// holds device sync, else 0 (the host runtime has no graphs; host sync alone has nothing to capture); also 0
// where the copy protocol was asked for with an odd c.verify_epochs, which no graph can hold.
int default_graph_iters(const A2aConfig& c, bool host_runtime);

// One chunk size's conclusion.
struct A2aBest {
  std::size_t chunk_bytes = 0;
  std::string mode;  // e.g. "lsa device/direct graph 16", "ptr host"
  Addressing addressing = Addressing::ptr;
  SyncMode sync = SyncMode::host;
  Protocol protocol = Protocol::simple;
  int graph_iters = 0;  // 0: launched one by one
  double p50_us = 0;
  double ceiling_ratio = 0;              // total_bw_gbps / ceiling of the same run (0 where no ceiling)
  std::optional<double> host_p50_us;     // the fastest verified host-sync row of the chunk, if any
  std::optional<double> gain_over_host;  // host_p50_us / p50_us
};

// Per chunk size, in the order the chunks first appear: the verified row (wrong == 0, p50 > 0) with the
// lowest p50; chunks without one are left out. Ties keep the earlier row.
std::vector<A2aBest> a2a_best_modes(const std::vector<A2aResult>& rows);

// "best  chunk 262144 B: lsa device/direct graph 16  9.80 us  81.2% of ceiling  4.10x host sync (40.20 us)"
std::string format_best(const A2aBest& b);
Json to_json(const A2aBest& b);

}  // namespace mori::symm
