// The all-to-all driver, the same for every backend (docs/mori-a2a.md): per chunk size, the ceiling; per
// configuration, a verification over back-to-back epochs with rank skew, then timing, then the push alone and
// the synchronisation alone in the same launch mode.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "mori/symm/a2a.hpp"
#include "mori/symm/bootstrap.hpp"
#include "mori/symm/detail/fault.hpp"
#include "mori/symm/detail/text.hpp"
#include "mori/symm/environment.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/log.hpp"
#include "mori/symm/probe.hpp"
#include "mori/symm/report.hpp"
#include "mori/symm/window.hpp"
#include "references.hpp"

namespace mori::symm {

using detail::A2aLayout;
using detail::Launch;
using detail::PushSpec;

namespace {

constexpr int kThreads = 512;

// Signal pad as the kernels see it (kernels/a2a.hip, MoriSignalPad).
std::size_t signal_pad_bytes(int world) {
  return 32 * 4 + 3 * 4 * static_cast<std::size_t>(world);  // flags, counters, bases
}

std::uint64_t sum_over_ranks(Bootstrap& boot, std::uint64_t v, const std::string& step) {
  std::uint64_t s = 0;
  for (auto x : boot.allgather_value(step, v)) s += x;
  return s;
}

// Which ranks share a device (by its PCI bus id), whether MPS serves them: one allgather.
detail::Placement find_placement(Bootstrap& boot, const DeviceInfo& info, int device, bool host_runtime,
                                 bool* time_sliced) {
  const detail::RankPlace mine{std::hash<std::string>{}(detail::host_name()),
                               detail::device_identity(info, device), mps_active()};
  const detail::Placement pl =
      detail::placement_of(boot.allgather_value("a2a.placement", mine), host_runtime);
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
  bool device_scope = false;  // signals at GPU scope (choose_signal_scope)
  bool cache_hints = false;   // every rank's kernels can mark loads evict-first (find_cache_hints)
  detail::Placement placement;
  std::unique_ptr<Window> win;
  std::unique_ptr<detail::A2aEngine> eng;

  Impl(Runtime& r, Bootstrap& b, int dev, const A2aConfig& c)
      : rt(r), boot(b), device(dev), cfg(c), me(b.rank()), world(b.world()), info(r.device_info(dev)) {
    const bool host = rt.platform() == Platform::host;
    if (boot.team_size() != world)
      throw UsageError("mori-a2a: every rank must be in one load/store team (this job spans " +
                       std::to_string(boot.num_nodes()) + " nodes)");
    placement = find_placement(boot, info, device, host, &time_sliced);
    if (placement.one_rank_per_device && !host) read_link_rates();
    refuse_time_slicing();
    refuse_ll_that_cannot_fit();
    device_scope = choose_signal_scope();
    find_cache_hints();
    // The ranks of one device (or of the host, for the host runtime) share its memory.
    const int sharing = host ? boot.team_size() : placement.max_ranks_per_device;
    validate_a2a(cfg, world, info.memory_bytes / static_cast<std::uint64_t>(std::max(sharing, 1)), host);
    ht = cfg.handle_type == "auto" ? choose_handle_type(rt, device) : parse_handle_type(cfg.handle_type);
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
      const auto ps = protocols(ch);
      if (std::find(ps.begin(), ps.end(), Protocol::ll) == ps.end()) continue;
      any = true;
      largest = std::max<std::uint64_t>(largest, ch);
    }
    return any ? 2 * static_cast<std::uint64_t>(world) * a2a_ll_pitch(largest) : 0;
  }

  // The slowest NVLink path from any rank to any peer (GB/s per direction, read through NVML); collective.
  void read_link_rates() {
    struct Dev {
      std::int32_t device;
    };
    const auto devs = boot.allgather_value("a2a.devices", Dev{device});
    double mine = -1;  // -1: no peer on another device yet; 0: a path of unknown rate
    std::string why = "no peer on another device";
    for (int q = 0; q < world && mine != 0; ++q) {
      if (q == me || boot.node_of(q) != boot.node_of(me)) continue;
      const Json g = link_gbps(rt, device, devs[static_cast<std::size_t>(q)].device, &why);
      const double v = g.is_number() ? g.get<double>() : 0.0;
      mine = mine < 0 ? v : std::min(mine, v);
    }
    mine = std::max(mine, 0.0);
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

  // as_configured = false: the automatic kernel shape whatever --blocks-per-peer and --unroll say.
  PushSpec spec(Addressing a, bool sync, std::size_t chunk, Protocol proto = Protocol::simple,
                bool as_configured = true) const {
    PushSpec s;
    s.addressing = a;
    s.sync = sync;
    s.protocol = proto;
    s.blocks_per_peer = cfg.blocks_per_peer && as_configured
                            ? cfg.blocks_per_peer
                            : auto_blocks_per_peer(info.multiprocessors, world, chunk, kThreads,
                                                   placement.one_rank_per_device);
    if (sync && proto == Protocol::ll) s.blocks_per_peer = std::min(s.blocks_per_peer, ll_block_limit());
    if (sync && proto == Protocol::copy)
      s.blocks_per_peer = 1;  // the copy engines move the data; one barrier block per peer
    s.unroll = cfg.unroll && as_configured ? cfg.unroll : auto_unroll(chunk);
    // The copy protocol's barrier keeps system scope, conservatively (docs/mori-a2a.md "Signal scope").
    s.device_scope = device_scope && sync && proto != Protocol::copy;
    s.source_evict_first = source_evict_first(chunk, as_configured);
    const bool may_overlap = cfg.overlap_launch && overlapping_launch_exists() &&
                             !(sync && proto == Protocol::copy);  // the barrier's predecessor is a copy
    if (may_overlap && !placement.one_rank_per_device && !(cfg.blocks_per_peer && as_configured) &&
        !(sync && proto == Protocol::ll))
      s.blocks_per_peer = overlapping_blocks_per_peer(s, chunk);
    s.overlap = may_overlap && (placement.one_rank_per_device || overlap_cannot_starve(s));
    return s;
  }

  // Ranks sharing a GPU, blocks per peer not given: the most blocks, up to one per 4 vectors per thread
  // (twice the usual), with which programmatic launches still fit, as long as that is at least half the usual
  // count; else the usual count. Measured at 8 ranks on one H200 (results/lab/h200/signal-scope/overlap-bpp/,
  // graph of 16): 256 KiB 8 blocks overlapped 10.01 / 9.94 us against 4 blocks 10.33 / 10.25; 1 MiB 8
  // overlapped 38.31 / 38.37 against 16 plain 38.73 / 38.57 (launched one by one 61.0 / 59.5 against 67.2
  // / 66.9); 4 MiB 8 overlapped 141.5 / 141.8 against 64 plain 135.7 / 136.1 (an eighth of the blocks costs
  // more than the launch gap it hides).
  int overlapping_blocks_per_peer(const PushSpec& usual, std::size_t chunk) const {
    const int fine =
        auto_blocks_per_peer(info.multiprocessors, world, chunk, kThreads, placement.one_rank_per_device, 4);
    PushSpec t = usual;
    for (t.blocks_per_peer = fine; t.blocks_per_peer >= std::max(1, (usual.blocks_per_peer + 1) / 2);
         --t.blocks_per_peer)
      if (overlap_cannot_starve(t)) return t.blocks_per_peer;
    return usual.blocks_per_peer;
  }

  // Programmatic launches where ranks share a device (docs/mori-a2a.md "Launches"): a successor waiting on
  // the device holds its place, and that can be the place another rank's kernel needs to reach the barrier
  // this kernel waits at (measured: 8 ranks on one H200, 64 blocks per peer, deadlocked until the bound
  // expired). Within one phase of the run every rank launches the same kernel, so the blocks that hold a
  // place while they wait are: a successor's blocks (until their own predecessor completes; a successor
  // starts only once every block of that predecessor has started, so a rank with blocks still to place has
  // none), and the one last block per launch that waits for the peers (simple, direct), or every block of a
  // launch (ll). When those cannot fill every place the device has for this kernel, a block still to place
  // always finds one:
  //   simple, direct: ranks x (grid + 1) <= places (waiting at most (ranks - 1) x grid + ranks < places)
  //   ll:             2 x ranks x grid <= places
  // A share of the multiprocessors set for MPS clients (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE below 100) is not
  // in the driver's occupancy figure, so no overlap then.
  bool overlap_cannot_starve(const PushSpec& s) const {
    const char* share = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    if (share && *share && std::atof(share) < 100) return false;
    const long grid = static_cast<long>(world) * s.blocks_per_peer;
    const long ranks = std::max(placement.max_ranks_per_device, 1);
    const long waiting = s.sync && s.protocol == Protocol::ll ? 2 * ranks * grid : ranks * (grid + 1);
    return waiting <= eng->resident_blocks(s);
  }

  // The source loads' L2 policy (docs/mori-a2a.md "Source cache"); as_configured = false: auto's choice.
  bool source_evict_first(std::size_t chunk, bool as_configured) const {
    if (as_configured && cfg.source_cache != SourceCache::auto_select)
      return cfg.source_cache == SourceCache::evict_first;
    return cache_hints &&
           auto_source_evict_first(placement.all_one_device && world > 1, world, chunk, info.l2_bytes);
  }

  // Cache hints exist in kernels built for NVIDIA sm_80 and newer (the JIT's arch: MORI_GPU_ARCHS may name
  // another than the device's); elsewhere the prelude's evict-first load is a plain one, and a row would
  // record evict-first for loads that were not so marked. Decided over all ranks (collective), so that a
  // refusal is every rank's and auto chooses alike everywhere.
  void find_cache_hints() {
    const std::string arch = rt.platform() == Platform::cuda ? target_arch(rt, device) : std::string();
    const std::int32_t mine = arch_has_l2_cache_hints(arch) ? 1 : 0;
    std::vector<int> without;
    const auto all = boot.allgather_value("a2a.cache_hints", mine);
    for (std::size_t q = 0; q < all.size(); ++q)
      if (!all[q]) without.push_back(static_cast<int>(q));
    cache_hints = without.empty();
    if (cfg.source_cache != SourceCache::evict_first || cache_hints) return;
    throw UsageError(
        "--source-cache evict-first: needs an NVIDIA GPU of sm_80 or newer on every rank (ranks without: " +
        detail::join_ranks(without) + "; here: " +
        (arch.empty() ? std::string("not CUDA's runtime") : "kernels for " + arch) + "); use normal or auto");
  }

  // Device scope where every rank runs on this one NVIDIA GPU (docs/mori-a2a.md "Signal scope" says why that
  // holds, on the hardware's terms). Elsewhere a peer on another device (or the AMD path, never measured at
  // device scope) needs system scope.
  bool choose_signal_scope() const {
    const bool applies = rt.platform() == Platform::cuda && placement.all_one_device;
    if (cfg.signal_scope == SignalScope::device && !applies)
      throw UsageError(std::string("--signal-scope device: needs every rank on one NVIDIA GPU (") +
                       (rt.platform() != Platform::cuda ? "this runtime is not CUDA's"
                                                        : "the ranks run on several devices") +
                       "); use system or auto");
    return applies && cfg.signal_scope != SignalScope::system;
  }

  // Every block of an ll launch waits for a peer's block, so all blocks of all ranks of a device must be
  // resident at once: at most one block per multiprocessor across them (a block of 512 threads always fits).
  // The blocks per peer that allows; 0 = not even one (then auto does not pick ll and --protocol ll is
  // refused, so ll only ever runs with at least 1).
  int ll_block_limit() const {
    if (rt.platform() == Platform::host) return 65535;
    return info.multiprocessors / (world * std::max(placement.max_ranks_per_device, 1));
  }
  bool ll_fits() const { return ll_block_limit() >= 1; }

  // As given, else the measured choice for this placement (never ll).
  std::vector<Protocol> protocols(std::size_t chunk) const {
    return a2a_protocols(cfg, chunk, placement.one_rank_per_device);
  }

  // Programmatic dependent launch needs compute capability 9.0 (NVIDIA); elsewhere the attribute would be
  // accepted and ignored, and the row would say "programmatic" for a plain launch.
  bool overlapping_launch_exists() const {
    if (rt.platform() != Platform::cuda || info.arch.rfind("sm_", 0) != 0) return false;
    return std::atoi(info.arch.c_str() + 3) >= 90;
  }

  void refuse_ll_that_cannot_fit() const {
    if (ll_fits() ||
        std::find(cfg.protocols.begin(), cfg.protocols.end(), Protocol::ll) == cfg.protocols.end())
      return;
    throw UsageError(
        "--protocol ll: " + std::to_string(world) + " ranks x " +
        std::to_string(placement.max_ranks_per_device) + " ranks per GPU need more blocks than the " +
        std::to_string(info.multiprocessors) +
        " multiprocessors hold at once, and every block of an ll launch waits (use direct or simple)");
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

  A2aResult run_row(std::size_t chunk, Addressing a, SyncMode sm, Protocol proto, int graph_k,
                    const Ceiling& ceiling) {
    A2aResult r;
    r.chunk_bytes = chunk;
    r.addressing = a;
    r.sync = sm;
    r.graph = graph_k > 0;
    r.graph_iters = graph_k;
    const bool device_sync = sm == SyncMode::device;
    PushSpec s = spec(a, device_sync, chunk, proto);
    if (device_sync && proto == Protocol::ll && cfg.blocks_per_peer > s.blocks_per_peer && me == 0)
      spdlog::warn("--blocks-per-peer {}: the ll protocol runs {} (all its blocks must be resident at once)",
                   cfg.blocks_per_peer, s.blocks_per_peer);
    if (device_sync && proto == Protocol::copy && cfg.blocks_per_peer > 1 && me == 0)
      spdlog::warn(
          "--blocks-per-peer {}: the copy protocol runs 1 (the copy engines move the data; one block "
          "per peer runs the barrier)",
          cfg.blocks_per_peer);
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
    // signal it there (scripts/h200-faults).
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
    const double sec = r.time_us.p50 * 1e-6, w = world, c = static_cast<double>(chunk);
    r.agg_bw_gbps = w * (w - 1) * c / sec / 1e9;
    r.total_bw_gbps = w * w * c / sec / 1e9;
    r.algbw_gbps = w * c / sec / 1e9;
    r.busbw_gbps = r.algbw_gbps * (w - 1) / w;
    r.ceiling = ceiling;
    r.physical = detail::physical_limit(placement, info, chunk, L.pitch);
    return r;
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
    std::vector<PushSpec> sm_copies{m.spec(Addressing::ptr, false, chunk, Protocol::simple, false)};
    const PushSpec configured = m.spec(Addressing::ptr, false, chunk);
    if (configured.blocks_per_peer != sm_copies[0].blocks_per_peer ||
        configured.unroll != sm_copies[0].unroll ||
        configured.source_evict_first != sm_copies[0].source_evict_first)
      sm_copies.push_back(configured);
    const Ceiling ceiling = detail::measure_ceiling(t, m.layout(chunk), sm_copies, m.world);
    const auto protocols = m.protocols(chunk);
    for (SyncMode s : m.cfg.syncs)
      for (Protocol pr : s == SyncMode::device ? protocols : std::vector<Protocol>{Protocol::simple})
        for (Addressing a : m.cfg.addressing) out.push_back(m.run_row(chunk, a, s, pr, 0, ceiling));
    if (m.cfg.graph > 0)
      for (Protocol pr : protocols)
        for (Addressing a : m.cfg.addressing)
          out.push_back(m.run_row(chunk, a, SyncMode::device, pr, m.cfg.graph, ceiling));
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
          {"contract", "double-buffered by epoch parity: launch n writes receive buffer n % 2"},
          {"window",
           {{"alloc_bytes", m.win->layout().alloc_bytes},
            {"stride", m.win->layout().stride},
            {"signal_offset", m.win->layout().signal_offset}}}};
}

}  // namespace mori::symm
