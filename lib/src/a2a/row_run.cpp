// SPDX-License-Identifier: MIT
// One row of the all-to-all's sweep run (row_run.hpp).
#include "row_run.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

#include "mori/symm/base/log.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/comm/stats.hpp"

namespace mori::symm::detail {

A2aLayout A2aRowRunner::layout(std::size_t chunk) const {
  const std::uint64_t pitch = a2a_pitch(chunk);
  const std::uint64_t world = static_cast<std::uint64_t>(boot.world());
  return {chunk, pitch, world * pitch, signal_offset, ll_offset, a2a_ll_pitch(chunk)};
}

PushSpec A2aRowRunner::spec(Addressing a, bool sync, std::size_t chunk, Protocol proto) const {
  PushSpec s = a2a_push_plan(cfg, facts, a, sync, chunk, proto, true);
  s.slow_ns = hooks.slow_push_ns();
  return s;
}

// Poisons both receive buffers, then runs verify_epochs back-to-back epochs (each: odd ranks late, fill with
// the epoch's tag, push, verify on the stream as a consumer would); graph mode captures them and replays the
// capture twice. Returns the wrong words summed over ranks; *wrong_ranks: the job's ranks that found any.
std::uint64_t A2aRowRunner::verify(const A2aLayout& L, const PushSpec& base, int graph_k,
                                   const std::string& tag, double skew, int* epochs_run,
                                   std::vector<int>* wrong_ranks) const {
  eng.poison(2 * L.region);
  eng.sync();
  boot.barrier(tag + ".poisoned");
  const double my_skew = boot.rank() % 2 ? skew : 0.0;
  auto epoch = [&](int e) {
    if (my_skew > 0) eng.delay(my_skew);
    eng.fill(L);
    PushSpec s = base;
    s.mutate = hooks.mutation(e);
    eng.push(L, s);
    if (!base.sync) {
      eng.sync();
      boot.barrier_fast(tag + ".verify.pushed");
    }
    eng.verify(L);
  };
  if (graph_k > 0) {
    auto g = eng.capture([&] {
      for (int e = 0; e < cfg.verify_epochs; ++e) epoch(e);
    });
    g->launch();
    g->launch();
    *epochs_run = 2 * cfg.verify_epochs;
  } else {
    for (int e = 0; e < cfg.verify_epochs; ++e) epoch(e);
    *epochs_run = cfg.verify_epochs;
  }
  // Every rank's count, so that an error can name the ranks that received wrong elements.
  const auto per_rank = boot.allgather_value<std::uint64_t>(tag + ".wrong", eng.take_wrong());
  std::uint64_t wrong = 0;
  wrong_ranks->clear();
  for (int q = 0; q < boot.world(); ++q)
    if (per_rank[static_cast<std::size_t>(q)]) {
      wrong += per_rank[static_cast<std::size_t>(q)];
      wrong_ranks->push_back(boot.job_rank(q));
    }
  boot.barrier(tag + ".verified");
  return wrong;
}

A2aResult A2aRowRunner::run(const A2aChunkPlan& plan, const A2aRowPlan& row, const Ceiling& ceiling) const {
  const std::size_t chunk = plan.chunk;
  const int graph_k = row.graph_iters;
  A2aResult r;
  r.chunk_bytes = chunk;
  r.addressing = row.addressing;
  r.sync = row.sync;
  r.graph = graph_k > 0;
  r.graph_iters = graph_k;
  const bool device_sync = row.sync == SyncMode::device;
  const PushSpec s = spec(row.addressing, device_sync, chunk, row.protocol);
  if (device_sync) warn_blocks_per_peer(row.protocol, s);
  r.protocol = row.protocol;
  r.blocks_per_peer = s.blocks_per_peer;
  r.unroll = s.unroll;
  const A2aLayout L = layout(chunk);
  const std::string tag = std::string("a2a.") + to_string(row.addressing) + "." + to_string(row.sync) + "." +
                          to_string(row.protocol) + (r.graph ? ".graph" : "");
  r.skew_us = cfg.skew_us >= 0 ? cfg.skew_us : eng.default_skew_us();
  r.wrong = verify(L, s, graph_k, tag, r.skew_us, &r.verified_epochs, &r.wrong_ranks);

  Timer t = timer(graph_k);
  // The push alone is the plain push of the same bytes for every protocol: the floor all of them share.
  PushSpec bare = spec(row.addressing, false, chunk);
  if (device_sync) bare.overlap = s.overlap;  // the row's launch mode (a push that never waits may overlap)
  const A2aLayout empty = layout(0);
  // One iteration, the push alone and the synchronisation alone, in the row's launch mode.
  std::vector<double> launches;  // this rank's launch calls of the timed iterations
  std::function<void()> iteration = [&] { eng.push(L, s); };
  std::function<void()> push_alone = [&] { eng.push(L, bare); };
  std::function<void()> sync_alone = [&] { eng.push(empty, s); };
  if (!device_sync) {
    iteration = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      eng.push(L, s);
      launches.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      eng.sync();
      boot.barrier_fast(tag + ".iter");
    };
    push_alone = [&] {
      eng.push(L, s);
      eng.sync();
    };
    sync_alone = [&] { boot.barrier_fast(tag + ".sync_only.iter"); };
  }
  const Launch how = r.graph ? Launch::graph : device_sync ? Launch::stream : Launch::wall;
  hooks.before_timed_loop(tag, device_sync, r.graph, boot.timeout_s());
  if (how != Launch::wall) t.launch_us = &launches;
  r.time_us = time_stats(max_over_ranks(boot, tag + ".times", t.samples(how, iteration, tag)));
  t.launch_us = nullptr;
  // The wall mode's iteration recorded its warmup too: the timed ones are the last.
  const std::size_t timed = static_cast<std::size_t>(r.time_us.samples);
  if (launches.size() > timed) launches.erase(launches.begin(), launches.end() - static_cast<long>(timed));
  if (!launches.empty()) r.launch_us = time_stats(max_over_ranks(boot, tag + ".launch", launches)).p50;
  r.push_only_us = t.p50(how, push_alone, tag + ".push_only");
  r.sync_only_us = t.p50(how, sync_alone, tag + ".sync_only");
  r.iters = r.time_us.samples * std::max(graph_k, 1);
  r.launch = eng.push_launch();
  r.signal_scope = !device_sync ? "none" : s.device_scope ? "device" : "system";
  r.source_cache = row.protocol == Protocol::copy ? "none" : s.source_evict_first ? "evict_first" : "normal";
  put_rates(r, plan, ceiling);
  r.team_size = boot.world();
  return r;
}

// A device-sync row whose protocol runs another --blocks-per-peer than given says so (rank 0).
void A2aRowRunner::warn_blocks_per_peer(Protocol proto, const PushSpec& s) const {
  if (boot.rank() != 0) return;
  if (proto == Protocol::ll && cfg.blocks_per_peer > s.blocks_per_peer)
    spdlog::warn("--blocks-per-peer {}: the ll protocol runs {} (all its blocks must be resident at once)",
                 cfg.blocks_per_peer, s.blocks_per_peer);
  if (proto == Protocol::copy && cfg.blocks_per_peer > 1)
    spdlog::warn(
        "--blocks-per-peer {}: the copy protocol runs 1 (the copy engines move the data; one block "
        "per peer runs the barrier)",
        cfg.blocks_per_peer);
}

// The row's bandwidths from its p50, and what it is set against: the same-run ceiling, the physical limit,
// the placement and the table cell of its plan (docs/mori-a2a.md).
void A2aRowRunner::put_rates(A2aResult& r, const A2aChunkPlan& plan, const Ceiling& ceiling) const {
  const double sec = r.time_us.p50 * 1e-6, w = boot.world(), c = static_cast<double>(r.chunk_bytes);
  r.agg_bw_gbps = w * (w - 1) * c / sec / 1e9;
  r.total_bw_gbps = w * w * c / sec / 1e9;
  r.algbw_gbps = w * c / sec / 1e9;
  r.busbw_gbps = r.algbw_gbps * (w - 1) / w;
  r.ceiling = ceiling;
  r.physical = plan.physical;
  r.placement = to_string(placement_class(facts.placement));
  r.table_world = plan.table_world;
  r.table_device = plan.table_device;
}

}  // namespace mori::symm::detail
