// SPDX-License-Identifier: MIT
// The all-to-all driver, the same for every backend (docs/mori-a2a.md): per chunk size, the ceiling; per
// configuration, a verification over back-to-back epochs with rank skew, then timing, then the push alone and
// the synchronisation alone in the same launch mode.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "mori/symm/a2a/a2a.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/env.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/platform/detail/nvml.hpp"
#include "mori/symm/window/window.hpp"
#include "references.hpp"
#include "timer.hpp"

namespace mori::symm {

using detail::A2aLayout;
using detail::Launch;
using detail::PushSpec;

namespace {

// Signal pad as the kernels see it (kernels/abi.hip, MoriSignalPad): flags, counters, bases.
std::size_t signal_pad_bytes(int world) {
  return static_cast<std::size_t>(MORI_SIGNAL_PAD_BYTES(world));
}

std::uint64_t sum_over_ranks(Bootstrap& boot, std::uint64_t v, const std::string& step) {
  std::uint64_t s = 0;
  for (auto x : boot.allgather_value(step, v)) s += x;
  return s;
}

// Which ranks share a device, whether MPS serves them, which run on MIG instances: one allgather. "Same GPU"
// is (the node of the load/store team, the device's PCI bus id): the team and the placement come from one
// source (a2a/detail/placement.hpp).
detail::DevicePlacement find_placement(Runtime& rt, Bootstrap& boot, const DeviceInfo& info, int device,
                                       bool host_runtime, bool* time_sliced) {
  const bool cuda = rt.platform() == Platform::cuda;
  const int nvml_mig = cuda && !info.pci_bus_id.empty() ? detail::nvml_device(info.pci_bus_id).mig_mode : -1;
  const bool mig = detail::mig_instance(rt.platform(), env_read("CUDA_VISIBLE_DEVICES"), nvml_mig);
  const detail::RankPlace mine =
      detail::rank_place(boot.node_of(boot.rank()), info, device, mps_active(), mig);
  const detail::DevicePlacement pl =
      detail::device_placement_of(boot.allgather_value("a2a.placement", mine), host_runtime);
  *time_sliced = !host_runtime && pl.max_ranks_per_device > 1 && pl.any_without_mps;
  return pl;
}

}  // namespace

struct A2aBench::Impl {
  Runtime& rt;
  Bootstrap& boot;
  int device;
  A2aConfig cfg;
  int me, world;
  DeviceInfo info;
  HandleType ht = HandleType::posix_fd;
  std::uint64_t ll_offset = 0;  // the ll protocol's staging, after the two receive buffers
  bool time_sliced = false;
  A2aFacts facts;  // what the plan depends on (a2a/plan.hpp); facts.placement: where the ranks sit
  detail::DevicePlacement& placement = facts.placement;
  std::unique_ptr<Window> win;
  std::unique_ptr<detail::A2aEngine> eng;

  Impl(Runtime& r, Bootstrap& b, int dev, const A2aConfig& c)
      : rt(r), boot(b), device(dev), cfg(c), me(b.rank()), world(b.world()), info(r.device_info(dev)) {
    const bool host = rt.platform() == Platform::host;
    if (boot.team_size() != world)
      throw UsageError("the all-to-all: every rank must be in one load/store team (this job spans " +
                       std::to_string(boot.num_nodes()) + " nodes)");
    placement = find_placement(rt, boot, info, device, host, &time_sliced);
    detail::refuse_mig(placement);  // before anything reads the parent GPU's PCI bus id as a device
    if (placement.one_rank_per_device && !host) read_link_rates();
    refuse_time_slicing();
    facts.platform = rt.platform();
    facts.device = info;
    const char* share = env_read("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    facts.mps_thread_share = share && *share && std::atof(share) < 100;
    facts.resident_blocks = [this](const PushSpec& s) { return eng->resident_blocks(s); };
    // Test-only, the job's (armed for rank 0, read by every rank): the plan of distinct GPUs on a shared one.
    facts.distinct_policy = detail::fault_armed("a2a.distinct-policy", 0);
    if (facts.distinct_policy && me == 0)
      spdlog::warn("MORI_FAULT a2a.distinct-policy: ranks sharing a GPU take the plan of distinct GPUs");
    const auto without_hints = find_cache_hints();
    a2a_plan_refusals(cfg, facts, without_hints, jit_arch);
    if (const std::string note = a2a_table_note(facts); !note.empty() && me == 0)
      spdlog::info("plan: {}", note);
    // The ranks of one device (or of the host, for the host runtime) share its memory.
    const int sharing = host ? boot.team_size() : placement.max_ranks_per_device;
    validate_a2a(cfg, world, info.memory_bytes / static_cast<std::uint64_t>(std::max(sharing, 1)), host);
    ht = resolve_handle_type(rt, device, cfg.handle_type);
    // The doctor's cheap checks; a failing rendezvous below logs what they found.
    const auto found = cheap_diagnoses(boot, &rt, device, 1);
    if (me == 0 && has_error(found)) spdlog::error("doctor: likely causes:\n{}", format_diagnoses(found));
    const std::uint64_t max_pitch = a2a_pitch(*std::max_element(cfg.chunks.begin(), cfg.chunks.end()));
    WindowOptions wo;
    ll_offset = 2 * static_cast<std::uint64_t>(world) * max_pitch;  // two receive buffers (epoch parity)
    wo.bytes = ll_offset + ll_staging_bytes();
    wo.signal_bytes = signal_pad_bytes(world);
    wo.stride_quantum = cfg.stride_quantum;
    wo.handle_type = ht;
    wo.device = device;
    win = std::make_unique<Window>(rt, wo);
    win->rendezvous(boot);
    eng = detail::make_a2a_engine(
        {rt, *win, me, world, device, boot.timeout_s(), static_cast<std::size_t>(world) * max_pitch});
    // Every flag of the ll staging starts as 0xFFFFFFFF, which the signed comparison of kernels/a2a.hip takes
    // as older than any epoch below 2^31: fresh memory may hold
    // anything.
    eng->poison(wo.bytes);
    eng->sync();
    boot.barrier("a2a.window_poisoned");
  }

  // Two parity buffers of world staging slots for the largest chunk the ll protocol runs at; 0 if none.
  std::uint64_t ll_staging_bytes() const {
    std::uint64_t largest = 0;
    bool any = false;
    for (std::size_t ch : cfg.chunks) {
      const auto ps = a2a_protocols(cfg, ch, placement.one_rank_per_device, world);
      if (std::find(ps.begin(), ps.end(), Protocol::ll) == ps.end()) continue;
      any = true;
      largest = std::max<std::uint64_t>(largest, ch);
    }
    return any ? 2 * static_cast<std::uint64_t>(world) * a2a_ll_pitch(largest) : 0;
  }

  // The slowest NVLink path from any rank to any peer (GB/s per direction, read through NVML); collective.
  void read_link_rates() {
    std::string why;
    const double mine = std::max(detail::slowest_link_from(
                                     placement.ranks, me,
                                     [](const std::string& a, const std::string& b, std::string* w) {
                                       const Json g = link_gbps_by_pci(a, b, w);
                                       return g.is_number() ? g.get<double>() : 0.0;
                                     },
                                     &why),
                                 0.0);
    double slowest = mine;
    for (double v : boot.allgather_value("a2a.links", mine)) slowest = std::min(slowest, v);
    placement.link_gbps = slowest > 0 ? slowest : 0;
    placement.link_source = slowest > 0
                                ? "NVLink " + std::to_string(static_cast<int>(slowest)) +
                                      " GB/s per direction on the slowest peer path (links x rate, NVML)"
                                : why;
  }

  void refuse_time_slicing() const {
    if (!time_sliced) return;
    const bool device_sync =
        std::find(cfg.syncs.begin(), cfg.syncs.end(), SyncMode::device) != cfg.syncs.end();
    const std::string what = std::to_string(placement.max_ranks_per_device) +
                             " ranks share one GPU and no MPS daemon serves them: their contexts time-slice";
    if (device_sync && !cfg.allow_time_slicing)
      throw UsageError(
          what +
          ", so a device barrier measures context switches (ms per iteration). Start MPS: "
          "eval \"$(scripts/mps start)\", or give --sync host, or --allow-time-slicing to measure "
          "it anyway");
    if (me == 0) spdlog::warn("{}; every row is marked time-sliced", what);
  }

  A2aLayout layout(std::size_t chunk) const {
    const std::uint64_t pitch = a2a_pitch(chunk);
    return {chunk,
            pitch,
            static_cast<std::uint64_t>(world) * pitch,
            win->layout().signal_offset,
            ll_offset,
            a2a_ll_pitch(chunk)};
  }

  // The row's kernel shape and launch (a2a/plan.hpp); as_configured = false: auto's shape.
  PushSpec spec(Addressing a, bool sync, std::size_t chunk, Protocol proto = Protocol::simple,
                bool as_configured = true) const {
    PushSpec s = a2a_push_plan(cfg, facts, a, sync, chunk, proto, as_configured);
    // Test-only: every push of this rank is slower by MORI_FAULT_DELAY_NS (docs/perf-check.md "A/B").
    if (detail::fault_armed("a2a.slow-kernel", me)) s.slow_ns = detail::fault_delay_ns();
    return s;
  }

  // Cache hints exist in kernels built for NVIDIA sm_80 and newer (the JIT's arch: MORI_GPU_ARCHS may name
  // another than the device's); elsewhere the prelude's evict-first load is a plain one, and a row would
  // record evict-first for loads that were not so marked. Gathered over all ranks (collective), so that a
  // refusal is every rank's and auto chooses alike everywhere. Returns the ranks without.
  std::string jit_arch;  // the arch the kernels are built for (CUDA); "" elsewhere
  std::vector<int> find_cache_hints() {
    const std::string arch = rt.platform() == Platform::cuda ? target_arch(rt, device) : std::string();
    const std::int32_t mine = arch_has_l2_cache_hints(arch) ? 1 : 0;
    std::vector<int> without;
    const auto all = boot.allgather_value("a2a.cache_hints", mine);
    for (std::size_t q = 0; q < all.size(); ++q)
      if (!all[q]) without.push_back(static_cast<int>(q));
    facts.cache_hints = without.empty();
    jit_arch = arch;
    return without;
  }

  detail::Timer timer(int graph_k) { return {*eng, boot, cfg.warmup, cfg.iters, graph_k}; }

  std::uint32_t mutation(int epoch) const {
    std::uint32_t m = 0;
    if (detail::fault_armed("a2a.no-barrier", me)) m |= detail::kMutateNoWait;
    if (epoch == 1 && detail::fault_armed("a2a.stale", me)) m |= detail::kMutateStale;
    if (detail::fault_armed("a2a.overrun", me)) m |= detail::kMutateOverrun;
    return m;
  }

  // Poisons both receive buffers, then runs verify_epochs back-to-back epochs (each: odd ranks late, fill
  // with the epoch's tag, push, verify on the stream as a consumer would); graph mode captures them and
  // replays the capture twice. Returns the wrong words summed over ranks.
  std::uint64_t verify_row(const A2aLayout& L, const PushSpec& base, int graph_k, const std::string& tag,
                           double skew, int* epochs_run) {
    eng->poison(2 * L.region);
    eng->sync();
    boot.barrier(tag + ".poisoned");
    const double my_skew = me % 2 ? skew : 0.0;
    auto epoch = [&](int e) {
      if (my_skew > 0) eng->delay(my_skew);
      eng->fill(L);
      PushSpec s = base;
      s.mutate = mutation(e);
      eng->push(L, s);
      if (!base.sync) {
        eng->sync();
        boot.barrier_fast(tag + ".verify.pushed");
      }
      eng->verify(L);
    };
    if (graph_k > 0) {
      auto g = eng->capture([&] {
        for (int e = 0; e < cfg.verify_epochs; ++e) epoch(e);
      });
      g->launch();
      g->launch();
      *epochs_run = 2 * cfg.verify_epochs;
    } else {
      for (int e = 0; e < cfg.verify_epochs; ++e) epoch(e);
      *epochs_run = cfg.verify_epochs;
    }
    const std::uint64_t wrong = sum_over_ranks(boot, eng->take_wrong(), tag + ".wrong");
    boot.barrier(tag + ".verified");
    return wrong;
  }

  A2aResult run_row(const A2aChunkPlan& plan, Addressing a, SyncMode sm, Protocol proto, int graph_k,
                    const Ceiling& ceiling) {
    const std::size_t chunk = plan.chunk;
    A2aResult r;
    r.chunk_bytes = chunk;
    r.addressing = a;
    r.sync = sm;
    r.graph = graph_k > 0;
    r.graph_iters = graph_k;
    const bool device_sync = sm == SyncMode::device;
    PushSpec s = spec(a, device_sync, chunk, proto);
    if (device_sync) warn_blocks_per_peer(proto, s);
    r.protocol = proto;
    r.blocks_per_peer = s.blocks_per_peer;
    r.unroll = s.unroll;
    const A2aLayout L = layout(chunk);
    const std::string tag = std::string("a2a.") + to_string(a) + "." + to_string(sm) + "." +
                            to_string(proto) + (r.graph ? ".graph" : "");
    r.skew_us = cfg.skew_us >= 0 ? cfg.skew_us : eng->default_skew_us();
    r.wrong = verify_row(L, s, graph_k, tag, r.skew_us, &r.verified_epochs);

    detail::Timer t = timer(graph_k);
    // Test-only: says when this rank enters the timed loop of a device-sync row, so that a fault suite can
    // signal it there (scripts/faults).
    if (device_sync && detail::fault_armed("a2a.announce", me)) {
      std::fprintf(stderr, "MORI_FAULT: rank %d entering the timed loop %s\n", me, tag.c_str());
      std::fflush(stderr);
    }
    // The push alone is the plain push of the same bytes for every protocol: the floor all of them share.
    PushSpec bare = spec(a, false, chunk);
    if (device_sync) bare.overlap = s.overlap;  // the row's launch mode (a push that never waits may overlap)
    const A2aLayout empty = layout(0);
    // One iteration, the push alone and the synchronisation alone, in the row's launch mode.
    std::function<void()> iteration = [&] { eng->push(L, s); };
    std::function<void()> push_alone = [&] { eng->push(L, bare); };
    std::function<void()> sync_alone = [&] { eng->push(empty, s); };
    if (!device_sync) {
      iteration = [&] {
        eng->push(L, s);
        eng->sync();
        boot.barrier_fast(tag + ".iter");
      };
      push_alone = [&] {
        eng->push(L, s);
        eng->sync();
      };
      sync_alone = [&] { boot.barrier_fast(tag + ".sync_only.iter"); };
    }
    const Launch how = r.graph ? Launch::graph : device_sync ? Launch::stream : Launch::wall;
    if (!r.graph) {
      detail::fault_point("a2a.timed", me);
      // Test-only: a rank that never launches its pushes and hangs on the host as a stuck rank would
      // (bounded, and before any collective step), so its peers' bounded waits expire first and name it (exit
      // 4).
      if (device_sync && detail::fault_armed("a2a.no-launch", me))
        std::this_thread::sleep_for(std::chrono::duration<double>(2 * boot.timeout_s() + 10));
    }
    r.time_us = time_stats(max_over_ranks(boot, tag + ".times", t.samples(how, iteration, tag)));
    r.push_only_us = t.p50(how, push_alone, tag + ".push_only");
    r.sync_only_us = t.p50(how, sync_alone, tag + ".sync_only");
    r.iters = r.time_us.samples * std::max(graph_k, 1);
    r.launch = eng->push_launch();
    r.signal_scope = !device_sync ? "none" : s.device_scope ? "device" : "system";
    r.source_cache = proto == Protocol::copy ? "none" : s.source_evict_first ? "evict_first" : "normal";
    put_rates(r, plan, ceiling);
    return r;
  }

  // A device-sync row whose protocol runs another --blocks-per-peer than given says so (rank 0).
  void warn_blocks_per_peer(Protocol proto, const PushSpec& s) const {
    if (me != 0) return;
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
  void put_rates(A2aResult& r, const A2aChunkPlan& plan, const Ceiling& ceiling) const {
    const double sec = r.time_us.p50 * 1e-6, w = world, c = static_cast<double>(r.chunk_bytes);
    r.agg_bw_gbps = w * (w - 1) * c / sec / 1e9;
    r.total_bw_gbps = w * w * c / sec / 1e9;
    r.algbw_gbps = w * c / sec / 1e9;
    r.busbw_gbps = r.algbw_gbps * (w - 1) / w;
    r.ceiling = ceiling;
    r.physical = plan.physical;
    r.placement = to_string(placement_class(placement));
    r.table_world = plan.table_world;
    r.table_device = plan.table_device;
  }
};

A2aBench::A2aBench(Runtime& rt, Bootstrap& boot, int device, const A2aConfig& cfg)
    : impl_(std::make_unique<Impl>(rt, boot, device, cfg)) {}
A2aBench::~A2aBench() = default;

std::string A2aBench::handle_type() const {
  return to_string(impl_->ht);
}
bool A2aBench::time_sliced() const {
  return impl_->time_sliced;
}

std::vector<A2aResult> A2aBench::run(const std::function<void(const std::string&)>& progress) {
  auto& m = *impl_;
  std::vector<A2aResult> out;
  for (std::size_t chunk : m.cfg.chunks) {
    detail::Timer t = m.timer(0);
    const A2aChunkPlan plan = a2a_chunk_plan(m.cfg, m.facts, chunk);
    const Ceiling ceiling = detail::measure_ceiling(t, m.layout(chunk), plan.ceiling_copies, m.world);
    for (const A2aRowPlan& row : plan.rows)
      out.push_back(m.run_row(plan, row.addressing, row.sync, row.protocol, row.graph_iters, ceiling));
    if (m.me == 0 && progress) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), "chunk %zu B done: ceiling %.1f GB/s (%s%s, spread %.1f%%)", chunk,
                    ceiling.gbps, ceiling.kind.c_str(), ceiling.graph ? ", graph" : "", 100 * ceiling.spread);
      progress(buf);
    }
  }
  return out;
}

void A2aBench::finish() {
  impl_->eng.reset();
  impl_->win->teardown();
}

Json A2aBench::gather_jit_json() {
  auto& m = *impl_;
  struct RankJit {
    double cold_ms, load_ms;
    std::int32_t compiled, cached;
  };
  RankJit mine{0, 0, 0, 0};
  const Jit* jit = m.eng ? m.eng->jit() : nullptr;
  if (jit)
    for (const auto& e : jit->stats()) {
      const bool cached = e.source == "cache";
      (cached ? mine.load_ms : mine.cold_ms) += e.ms;
      ++(cached ? mine.cached : mine.compiled);
    }
  auto all = m.boot.allgather_value("a2a.jit", mine);
  if (!jit) return Json(nullptr);
  Json j = jit->stats_json();
  Json ranks = Json::array();
  int compiles = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    ranks.push_back({{"rank", r},
                     {"cold_compile_ms", all[r].cold_ms},
                     {"cache_load_ms", all[r].load_ms},
                     {"compiled", all[r].compiled},
                     {"from_cache", all[r].cached}});
    compiles += all[r].compiled;
  }
  j["ranks"] = ranks;
  j["compiles_in_job"] = compiles;
  return j;
}

Json A2aBench::extra_meta() const {
  const auto& m = *impl_;
  return {{"shared_device_without_mps", m.time_sliced},
          {"all_ranks_one_device", m.placement.all_one_device},
          {"one_rank_per_device", m.placement.one_rank_per_device},
          {"plan_policy", m.facts.distinct_policy ? "distinct_gpus" : "placement"},
          {"contract", "double-buffered by epoch parity: launch n writes receive buffer n % 2"},
          {"window",
           {{"alloc_bytes", m.win->layout().alloc_bytes},
            {"stride", m.win->layout().stride},
            {"signal_offset", m.win->layout().signal_offset}}}};
}

}  // namespace mori::symm
