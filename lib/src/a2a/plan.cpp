// SPDX-License-Identifier: MIT
// The all-to-all's plan (mori/symm/a2a/plan.hpp): every automatic choice, from the options and the facts.
#include "mori/symm/a2a/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/enum_names.hpp"
#include "mori/symm/base/error.hpp"
#include "references.hpp"

namespace mori::symm {

bool a2a_copy_fits_graphs(const A2aConfig& c) {
  return c.graph == 0 || (c.graph % 2 == 0 && c.verify_epochs % 2 == 0);
}

bool a2a_working_set_fits_l2(int ranks_on_device, int world, std::uint64_t pitch, std::uint64_t l2_bytes) {
  return l2_bytes > 0 && 2.0L * ranks_on_device * world * static_cast<long double>(pitch) <=
                             static_cast<long double>(l2_bytes);
}

bool auto_source_evict_first(bool ranks_share_one_gpu, int world, std::size_t chunk_bytes,
                             std::uint64_t l2_bytes) {
  return ranks_share_one_gpu && l2_bytes > 0 &&
         !a2a_working_set_fits_l2(world, world, a2a_pitch(chunk_bytes), l2_bytes);
}

std::vector<Protocol> a2a_protocols(const A2aConfig& c, std::size_t chunk_bytes, bool one_rank_per_device,
                                    int world) {
  if (!c.protocols.empty()) return c.protocols;
  const A2aTableCell& t = a2a_table_cell(one_rank_per_device, world);
  // copy in a graph needs an even launch count per replay (validate_a2a); auto then takes simple instead.
  if (chunk_bytes >= t.copy_from && a2a_copy_fits_graphs(c)) return {Protocol::copy};
  return {chunk_bytes < t.simple_from ? Protocol::direct : Protocol::simple};
}

int auto_blocks_per_peer(int multiprocessors, int world, std::size_t chunk_bytes, int threads,
                         bool remote_peers, int vectors_per_thread) {
  // Each thread should move at least 8 vectors (128 bytes): thinner blocks spend their time being scheduled
  // (measured on the H200 at 8 ranks, 256 KiB: 4 blocks per peer 23.6 us, 32 blocks 31.8 us). And no more
  // blocks than about four per multiprocessor across all peers.
  const std::size_t vecs = chunk_bytes / 16;
  const std::size_t per_block =
      static_cast<std::size_t>(threads) * static_cast<std::size_t>(std::max(vectors_per_thread, 1));
  const std::size_t useful = (vecs + per_block - 1) / per_block;
  const std::size_t target =
      (4 * static_cast<std::size_t>(std::max(multiprocessors, 1)) + static_cast<std::size_t>(world) - 1) /
      static_cast<std::size_t>(world);
  std::size_t bpp = std::min(useful, target);
  if (remote_peers) {
    const auto floor = static_cast<std::size_t>(a2a_table_cell(true, world).bpp_floor);
    bpp = std::max(bpp, std::min<std::size_t>(floor, vecs / static_cast<std::size_t>(threads)));
  }
  return static_cast<int>(std::clamp<std::size_t>(bpp, 1, 65535));
}

std::uint64_t a2a_pitch(std::uint64_t chunk_bytes) {
  return (chunk_bytes + 16 + 255) / 256 * 256;
}

std::uint64_t a2a_ll_pitch(std::uint64_t chunk_bytes) {
  const std::uint64_t words = (chunk_bytes + 3) / 4;
  const std::uint64_t groups = words ? (words + 3) / 4 : 1;
  return (groups * 32 + 255) / 256 * 256;
}

namespace {

constexpr int kThreads = 512;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t kNever = ~std::size_t{0};

// The automatic tables (docs/mori-a2a.md "The automatic tables"), one cell per (placement, world measured
// at). A plan for a world with no cell of its own takes the nearest measured one and says so (the row's
// table_world; a2a_table_note).
//
// Peers on other GPUs, 2 ranks (2 x H200 over NVLink):
//   protocol: direct below 16 MiB, simple from there, ll never, copy never. results/h200x2/protocol-sweep/
//     (graph of 16, two runs): direct fastest from 4 KiB to 4 MiB, simple from 16 MiB, ll never (4 KiB: 3.83
//     vs 3.55 us; 256 KiB: 6.69 vs 4.79); copy never won (results/h200x2/protocol-sweep-copy/: 64 MiB 191.1
//     vs simple 190.2 us).
//   blocks per peer: at least min(32, one vector per thread), since one block's stores over NVLink are
//     latency-bound (256 KiB in a graph: 4 blocks 5.6 us, 32 blocks 4.7 us, 128 blocks 5.7 us;
//     results/lab/h200x2/bpp-sweep/).
//   unroll: 8 from 16 MiB (the rule measured with 8 ranks on one H200; no 2-GPU unroll sweep is committed).
// Ranks sharing one GPU, 8 ranks (one H200 under MPS, device scope):
//   protocol: direct below 64 MiB, copy from 64 MiB, ll never. results/h200/protocol-sweep-scope/ (two runs):
//     direct fastest from 4 KiB to 16 MiB (4 KiB: ll 5.64 / 5.74 vs 4.62 / 4.84 us; at system scope ll had
//     won there, 6.87 vs 7.20); copy from 64 MiB (2048.6 vs simple 2142.1, direct 2151.2 us; 0.995 of the
//     ceiling), not at 16 MiB (541.8 vs 530.6).
//   blocks per peer: no floor (4 blocks per multiprocessor over all peers; 256 KiB: 4 blocks per peer 23.6
//   us,
//     32 blocks 31.8 us).
//   unroll: 8 from 16 MiB (measured 1.3% faster there on the H200).
// Nothing was measured at 4 ranks or at 8 distinct GPUs: those plans read the cells above. Nothing was
// measured on another GPU model: an H100 (sm_90 too) reads the H200's cells, an AMD GPU the nearest cell of
// any GPU.
constexpr A2aTableCell kCells[] = {
    {true, 2, 16 * MiB, kNever, 32, 16 * MiB,
     "results/h200x2/protocol-sweep/, protocol-sweep-copy/, results/lab/h200x2/bpp-sweep/", "NVIDIA H200",
     "sm_90"},
    {false, 8, 64 * MiB, 64 * MiB, 0, 16 * MiB, "results/h200/protocol-sweep-scope/", "NVIDIA H200", "sm_90"},
};

// The vendor's part of an arch name: "sm_" (NVIDIA) or "gfx" (AMD); "" for none.
std::string arch_family(const std::string& arch) {
  for (const char* p : {"sm_", "gfx"})
    if (arch.rfind(p, 0) == 0) return p;
  return "";
}

// How far apart two world sizes are, for the nearest cell: by ratio (2 is as near to 4 as 8 is).
double world_distance(int a, int b) {
  return std::abs(std::log2(static_cast<double>(std::max(a, 1))) -
                  std::log2(static_cast<double>(std::max(b, 1))));
}

int world_of(const A2aFacts& f) {
  return std::max(f.placement.world, 1);
}

// The placement the policy tables read: the physical one, or distinct GPUs under the test-only switch. The
// residency rule, ll's limit and the physical limit always read the physical placement.
bool policy_one_per_device(const A2aFacts& f) {
  return f.placement.one_rank_per_device || (f.distinct_policy && world_of(f) > 1);
}
bool policy_all_one_device(const A2aFacts& f) {
  return f.placement.all_one_device && !f.distinct_policy;
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
// in the driver's occupancy figure, so no overlap then; nor where the occupancy is unknown.
bool overlap_cannot_starve(const A2aFacts& f, const detail::PushSpec& s) {
  if (f.mps_thread_share || !f.resident_blocks) return false;
  const long grid = static_cast<long>(world_of(f)) * s.blocks_per_peer;
  const long ranks = std::max(f.placement.max_ranks_per_device, 1);
  const long waiting = s.sync && s.protocol == Protocol::ll ? 2 * ranks * grid : ranks * (grid + 1);
  return waiting <= f.resident_blocks(s);
}

// Ranks sharing a GPU, blocks per peer not given: the most blocks, up to one per 4 vectors per thread
// (twice the usual), with which programmatic launches still fit, as long as that is at least half the usual
// count; else the usual count. Measured at 8 ranks on one H200 (results/lab/h200/signal-scope/overlap-bpp/,
// graph of 16): 256 KiB 8 blocks overlapped 10.01 / 9.94 us against 4 blocks 10.33 / 10.25; 1 MiB 8
// overlapped 38.31 / 38.37 against 16 plain 38.73 / 38.57 (launched one by one 61.0 / 59.5 against 67.2
// / 66.9); 4 MiB 8 overlapped 141.5 / 141.8 against 64 plain 135.7 / 136.1 (an eighth of the blocks costs
// more than the launch gap it hides).
int overlapping_blocks_per_peer(const A2aFacts& f, const detail::PushSpec& usual, std::size_t chunk) {
  const int fine = auto_blocks_per_peer(f.device.multiprocessors, world_of(f), chunk, kThreads,
                                        policy_one_per_device(f), 4);
  detail::PushSpec t = usual;
  for (t.blocks_per_peer = fine; t.blocks_per_peer >= std::max(1, (usual.blocks_per_peer + 1) / 2);
       --t.blocks_per_peer)
    if (overlap_cannot_starve(f, t)) return t.blocks_per_peer;
  return usual.blocks_per_peer;
}

// The source loads' L2 policy (docs/mori-a2a.md "Source cache"); as_configured = false: auto's choice.
bool source_evict_first(const A2aConfig& cfg, const A2aFacts& f, std::size_t chunk, bool as_configured) {
  if (as_configured && cfg.source_cache != SourceCache::auto_select)
    return cfg.source_cache == SourceCache::evict_first;
  const int world = world_of(f);
  return f.cache_hints &&
         auto_source_evict_first(policy_all_one_device(f) && world > 1, world, chunk, f.device.l2_bytes);
}

const A2aTableCell& table_cell_of(const A2aFacts& f) {
  return a2a_table_cell(policy_one_per_device(f), world_of(f), &f.device);
}

}  // namespace

int a2a_table_device_distance(const A2aTableCell& c, const DeviceInfo& device) {
  if (device.arch.empty()) return 3;
  if (device.name == c.device) return 0;
  if (device.arch == c.arch) return 1;
  return arch_family(device.arch) == arch_family(c.arch) && !arch_family(c.arch).empty() ? 2 : 3;
}

const A2aTableCell& a2a_table_cell(bool remote, int world, const DeviceInfo* device) {
  static const DeviceInfo kNoGpu{};
  const DeviceInfo& dev = device ? *device : kNoGpu;
  const A2aTableCell* best = nullptr;
  for (const auto& c : kCells) {
    if (c.remote != remote) continue;
    if (!best) {
      best = &c;
      continue;
    }
    const int dd = a2a_table_device_distance(c, dev), bd = a2a_table_device_distance(*best, dev);
    const double d = world_distance(c.world, world), b = world_distance(best->world, world);
    if (dd < bd || (dd == bd && (d < b || (d == b && c.world < best->world)))) best = &c;
  }
  return *best;  // every placement has a cell (kCells)
}

std::string a2a_table_note(const A2aFacts& f) {
  const A2aTableCell& c = table_cell_of(f);
  const bool host = f.platform == Platform::host;
  const int dd = a2a_table_device_distance(c, f.device);
  std::string note;
  if (c.world != world_of(f))
    note = "the automatic tables have no cell measured at " + std::to_string(world_of(f)) + " ranks " +
           (c.remote ? "on distinct devices" : "sharing one device") +
           ": the plan reads the nearest, measured at " + std::to_string(c.world) + " ranks (" + c.source +
           "); rows say table_world " + std::to_string(c.world);
  if (!host && dd > 0) {
    static constexpr const char* kHow[] = {"", "the same arch", "the same vendor", "another vendor"};
    note += std::string(note.empty() ? "" : "; ") + "the automatic tables have no cell measured on " +
            f.device.name + " (" + f.device.arch + "): the plan reads the nearest GPU's, " + c.device + " (" +
            c.arch + ", " + kHow[dd] + "); rows say table_device " + c.device;
  }
  return note;
}

const char* to_string(PlacementClass c) noexcept {
  static constexpr EnumName<PlacementClass> kNames[] = {
      {PlacementClass::host, "host"},
      {PlacementClass::single_rank, "single_rank"},
      {PlacementClass::one_gpu, "one_gpu"},
      {PlacementClass::one_rank_per_gpu, "one_rank_per_gpu"},
      {PlacementClass::several_ranks_per_gpu, "several_ranks_per_gpu"}};
  return enum_name(kNames, c, "several_ranks_per_gpu");
}

PlacementClass placement_class(const detail::DevicePlacement& pl) {
  if (pl.host_runtime) return PlacementClass::host;
  if (pl.world <= 1) return PlacementClass::single_rank;
  if (pl.all_one_device) return PlacementClass::one_gpu;
  if (pl.one_rank_per_device) return PlacementClass::one_rank_per_gpu;
  return PlacementClass::several_ranks_per_gpu;
}

bool a2a_overlapping_launch_exists(const A2aFacts& f) {
  // Programmatic dependent launch needs compute capability 9.0 (NVIDIA); elsewhere the attribute would be
  // accepted and ignored, and the row would say "programmatic" for a plain launch.
  if (f.platform != Platform::cuda || f.device.arch.rfind("sm_", 0) != 0) return false;
  return std::atoi(f.device.arch.c_str() + 3) >= 90;
}

// Every block of an ll launch waits for a peer's block, so all blocks of all ranks of a device must be
// resident at once: at most one block per multiprocessor across them (a block of 512 threads always fits).
int a2a_ll_block_limit(const A2aFacts& f, int world) {
  if (f.platform == Platform::host) return 65535;
  return f.device.multiprocessors / (std::max(world, 1) * std::max(f.placement.max_ranks_per_device, 1));
}

// Device scope where every rank runs on this one NVIDIA GPU (docs/mori-a2a.md "Signal scope" says why that
// holds, on the hardware's terms). Elsewhere a peer on another device (or the AMD path, never measured at
// device scope) needs system scope.
bool a2a_device_scope(const A2aConfig& cfg, const A2aFacts& f) {
  const bool applies = f.platform == Platform::cuda && policy_all_one_device(f);
  return applies && cfg.signal_scope != SignalScope::system;
}

void a2a_plan_refusals(const A2aConfig& cfg, const A2aFacts& f, const std::vector<int>& ranks_without_hints,
                       const std::string& jit_arch) {
  detail::refuse_mig(f.placement);
  const int world = world_of(f);
  if (a2a_ll_block_limit(f, world) < 1 &&
      std::find(cfg.protocols.begin(), cfg.protocols.end(), Protocol::ll) != cfg.protocols.end())
    throw UsageError(
        "--protocol ll: " + std::to_string(world) + " ranks x " +
        std::to_string(f.placement.max_ranks_per_device) + " ranks per GPU need more blocks than the " +
        std::to_string(f.device.multiprocessors) +
        " multiprocessors hold at once, and every block of an ll launch waits (use direct or simple)");
  const bool device_applies = f.platform == Platform::cuda && policy_all_one_device(f);
  if (cfg.signal_scope == SignalScope::device && !device_applies)
    throw UsageError(
        std::string("--signal-scope device: needs every rank on one NVIDIA GPU (") +
        (f.platform != Platform::cuda ? "this runtime is not CUDA's" : "the ranks run on several devices") +
        "); use system or auto");
  if (cfg.source_cache == SourceCache::evict_first && !ranks_without_hints.empty())
    throw UsageError(
        "--source-cache evict-first: needs an NVIDIA GPU of sm_80 or newer on every rank (ranks without: " +
        detail::join_ranks(ranks_without_hints) +
        "; here: " + (jit_arch.empty() ? std::string("not CUDA's runtime") : "kernels for " + jit_arch) +
        "); use normal or auto");
}

detail::PushSpec a2a_push_plan(const A2aConfig& cfg, const A2aFacts& f, Addressing a, bool sync,
                               std::size_t chunk, Protocol proto, bool as_configured) {
  const int world = world_of(f);
  const bool one_per_device = policy_one_per_device(f);
  detail::PushSpec s;
  s.addressing = a;
  s.sync = sync;
  s.protocol = proto;
  s.blocks_per_peer =
      cfg.blocks_per_peer && as_configured
          ? cfg.blocks_per_peer
          : auto_blocks_per_peer(f.device.multiprocessors, world, chunk, kThreads, one_per_device);
  if (sync && proto == Protocol::ll)
    s.blocks_per_peer = std::min(s.blocks_per_peer, a2a_ll_block_limit(f, world));
  if (sync && proto == Protocol::copy)
    s.blocks_per_peer = 1;  // the copy engines move the data; one barrier block per peer
  s.unroll = cfg.unroll && as_configured ? cfg.unroll : chunk >= table_cell_of(f).unroll8_from ? 8 : 4;
  // The copy protocol's barrier keeps system scope, conservatively (docs/mori-a2a.md "Signal scope").
  s.device_scope = a2a_device_scope(cfg, f) && sync && proto != Protocol::copy;
  s.source_evict_first = source_evict_first(cfg, f, chunk, as_configured);
  const bool may_overlap = cfg.overlap_launch && a2a_overlapping_launch_exists(f) &&
                           !(sync && proto == Protocol::copy);  // the barrier's predecessor is a copy
  if (may_overlap && !one_per_device && !(cfg.blocks_per_peer && as_configured) &&
      !(sync && proto == Protocol::ll))
    s.blocks_per_peer = overlapping_blocks_per_peer(f, s, chunk);
  // One rank per GPU physically: nothing shares the device's places. Else the residency rule decides, under
  // the distinct-GPU policy too.
  s.overlap = may_overlap && (f.placement.one_rank_per_device || overlap_cannot_starve(f, s));
  return s;
}

std::vector<A2aRowPlan> a2a_row_plans(const A2aConfig& cfg, const std::vector<Protocol>& protocols) {
  std::vector<A2aRowPlan> rows;
  for (SyncMode s : cfg.syncs)
    for (Protocol pr : s == SyncMode::device ? protocols : std::vector<Protocol>{Protocol::simple})
      for (Addressing a : cfg.addressing) rows.push_back({s, pr, a, 0});
  if (cfg.graph > 0)
    for (Protocol pr : protocols)
      for (Addressing a : cfg.addressing) rows.push_back({SyncMode::device, pr, a, cfg.graph});
  return rows;
}

A2aChunkPlan a2a_chunk_plan(const A2aConfig& cfg, const A2aFacts& f, std::size_t chunk) {
  A2aChunkPlan p;
  p.chunk = chunk;
  p.protocols = a2a_protocols(cfg, chunk, policy_one_per_device(f), world_of(f));
  p.rows = a2a_row_plans(cfg, p.protocols);
  p.table_world = table_cell_of(f).world;
  p.table_device = table_cell_of(f).device;
  p.ceiling_copies = {a2a_push_plan(cfg, f, Addressing::ptr, false, chunk, Protocol::simple, false)};
  const detail::PushSpec configured = a2a_push_plan(cfg, f, Addressing::ptr, false, chunk);
  const auto& first = p.ceiling_copies[0];
  if (configured.blocks_per_peer != first.blocks_per_peer || configured.unroll != first.unroll ||
      configured.source_evict_first != first.source_evict_first)
    p.ceiling_copies.push_back(configured);
  p.physical = detail::physical_limit(f.placement, f.device, chunk, a2a_pitch(chunk));
  return p;
}

}  // namespace mori::symm
