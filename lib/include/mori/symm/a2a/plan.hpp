// SPDX-License-Identifier: MIT
// The all-to-all's plan (docs/mori-a2a.md "The plan"): a pure function from the options and the facts every
// rank gathered (where the ranks sit, the device, its occupancy) to what runs for each chunk: the protocols,
// each row's kernel shape and launch mode, signal scope and source cache, the SM-copy shapes the ceiling
// measures, and the physical limit. The driver (lib/src/a2a/a2a.cpp) gathers the facts and executes
// plans; nothing here talks to a runtime or to MPI, so tests/unit/a2a_plan_test.cpp holds it to a
// hand-written table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/a2a/detail/placement.hpp"
#include "mori/symm/a2a/types.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

// The automatic choices that need no device facts beyond their arguments (each also a rule of validate_a2a).

// The copy protocol's copies are enqueued by the host into the receive buffer of the parity the launch will
// have, so a captured graph holds fixed parities: each replay must start at the parity of the capture, which
// an even number of launches per graph keeps (docs/mori-a2a.md "Synchronisation and protocols").
bool a2a_copy_fits_graphs(const A2aConfig& c);

// blocks_per_peer when not given: enough blocks to fill the device, never more than the chunk has work for.
// remote_peers (one rank per device, peers over links): at least min(the table cell's floor, one vector per
// thread) blocks, since one block's stores over NVLink are latency-bound (the cell of `world` ranks,
// a2a/plan.hpp a2a_table_cell: 32, measured on 2 x H200). vectors_per_thread: the 16-byte
// vectors each thread moves at least (8 by default; mori-a2a tries 4 where ranks share a GPU, see
// docs/mori-a2a.md "Launches").
int auto_blocks_per_peer(int multiprocessors, int world, std::size_t chunk_bytes, int threads,
                         bool remote_peers = false, int vectors_per_thread = 8);

// Receive-slot pitch for a chunk: the chunk plus a poisoned guard of at least 16 bytes, 256-byte aligned.
std::uint64_t a2a_pitch(std::uint64_t chunk_bytes);
// Staging-slot pitch of the ll protocol: 8 bytes per 32-bit word, in groups of 4 words (at least one group:
// a zero-byte chunk still sends its flags), 256-byte aligned.
std::uint64_t a2a_ll_pitch(std::uint64_t chunk_bytes);

// The protocols of device-sync rows at this chunk size: as given, else the one measured fastest for this
// placement at `world` ranks (the table cell of a2a/plan.hpp a2a_table_cell; docs/mori-a2a.md
// "Synchronisation and protocols").
std::vector<Protocol> a2a_protocols(const A2aConfig& c, std::size_t chunk_bytes, bool one_rank_per_device,
                                    int world);
// Whether the working set of one device, every one of its ranks' source and receive slots (2 x
// ranks_on_device x world x pitch), fits in its L2 (l2_bytes; 0 = unknown: false). The row field l2_resident.
bool a2a_working_set_fits_l2(int ranks_on_device, int world, std::uint64_t pitch, std::uint64_t l2_bytes);
// --source-cache auto: evict-first where ranks share one GPU (ranks_share_one_gpu: all on it, more than one)
// and their working set does not fit in its L2 (a2a_working_set_fits_l2; l2_bytes 0 = unknown: normal).
// Measured at 8 ranks on one H200 (results/lab/h200/source-cache/).
bool auto_source_evict_first(bool ranks_share_one_gpu, int world, std::size_t chunk_bytes,
                             std::uint64_t l2_bytes);

// What the plan depends on, the same on every rank (each fact from one allgather or from this device, whose
// kind every rank shares in the configurations the suite runs).
struct A2aFacts {
  Platform platform = Platform::cuda;
  detail::DevicePlacement
      placement;                  // who shares a device, MPS, MIG, the slowest link (detail/placement.hpp)
  DeviceInfo device;              // multiprocessors, arch, L2, memory, HBM figures
  bool cache_hints = false;       // every rank's kernels can mark loads evict-first (JIT arch sm_80+)
  bool mps_thread_share = false;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE below 100: occupancy not known
  // Blocks of this push kernel the whole device holds at once (the driver's occupancy, asked once per kernel
  // instantiation); null: unknown, which means plain launches where ranks share a device.
  std::function<long(const detail::PushSpec&)> resident_blocks;
  // Test-only (MORI_FAULT a2a.distinct-policy, compiled out with the other fault points): ranks sharing a GPU
  // take the plan of distinct GPUs (system scope, normal loads, the remote protocol and blocks-per-peer
  // tables) while the physical residency rule still decides launches (docs/mori-a2a.md "The plan").
  bool distinct_policy = false;
};

// How the ranks sit, as every result row records it ("placement" in mori.a2a/2).
enum class PlacementClass {
  host,                   // the host runtime: every rank on the CPU
  single_rank,            // world 1
  one_gpu,                // every rank on one GPU (several under MPS, or time-sliced)
  one_rank_per_gpu,       // each rank on its own GPU
  several_ranks_per_gpu,  // several GPUs, some shared by several ranks
};
const char* to_string(PlacementClass c) noexcept;
PlacementClass placement_class(const detail::DevicePlacement& pl);

// One cell of the automatic tables (docs/mori-a2a.md "The automatic tables"): the protocol, blocks-per-peer
// and unroll choices measured for one placement (peers on other GPUs, or ranks sharing one GPU) at one world
// size on one GPU model. The cells live in lib/src/a2a/plan.cpp, each citing its measurements.
struct A2aTableCell {
  bool remote = false;          // peers on other GPUs (else ranks sharing one GPU)
  int world = 0;                // the ranks it was measured at
  std::size_t simple_from = 0;  // protocol: direct below this chunk, simple from it
  std::size_t copy_from = 0;    // protocol: copy from this chunk (SIZE_MAX: never)
  int bpp_floor = 0;            // blocks per peer: at least min(this, one 16-byte vector per thread); 0: none
  std::size_t unroll8_from = 0;  // unroll 8 from this chunk, else 4
  const char* source = "";       // the measurements behind it (results/...)
  const char* device = "";       // the GPU it was measured on (DeviceInfo::name)
  const char* arch = "";         // that GPU's arch (DeviceInfo::arch: sm_90, gfx942)
};
// The cell a plan for `world` ranks on `device` reads: the nearest measured GPU first (that model, else the
// same arch, else the same vendor, else any; the host runtime has no GPU and takes any), then the nearest
// world (by ratio of world sizes, the smaller on a tie); the plan says which (A2aChunkPlan::table_world,
// table_device). device null: no GPU (any cell, by world alone). The protocol choice (a2a_protocols) and the
// options check read the cell by world alone: the same cell while every cell is of one GPU model
// (A2aTableDevice.OneGpuModelSoTheWorldAloneFindsTheCell fails once that stops being true).
const A2aTableCell& a2a_table_cell(bool remote, int world, const DeviceInfo* device = nullptr);
// How near the GPU a cell was measured on is to `device`: 0 that model, 1 the same arch, 2 the same vendor
// (arch family: sm_ or gfx), 3 another (and for a device of no arch: the host runtime).
int a2a_table_device_distance(const A2aTableCell& c, const DeviceInfo& device);
// "" where the cell the plan reads was measured at the facts' world on the facts' GPU model (or any, on the
// host runtime); else one line saying which cell it takes.
std::string a2a_table_note(const A2aFacts& f);

// One chunk's plan.
// One row of a chunk's sweep: what it runs (its kernel shape is a2a_push_plan's).
struct A2aRowPlan {
  SyncMode sync = SyncMode::host;
  Protocol protocol = Protocol::simple;  // host sync: simple (it signals nothing)
  Addressing addressing = Addressing::ptr;
  int graph_iters = 0;  // 0: launched one by one
};

// The sweep of one chunk, as data: every sync mode of the options with, for device sync, every protocol, each
// over every addressing model, launched one by one; then, with --graph K, device sync's protocols and
// addressing models again in a graph of K. The rows of a report come in this order.
std::vector<A2aRowPlan> a2a_row_plans(const A2aConfig& cfg, const std::vector<Protocol>& protocols);

struct A2aChunkPlan {
  std::size_t chunk = 0;
  std::vector<Protocol> protocols;               // the device-sync rows' protocols (as given, else auto)
  std::vector<A2aRowPlan> rows;                  // the sweep, in the report's order (a2a_row_plans)
  std::vector<detail::PushSpec> ceiling_copies;  // SM-copy shapes the ceiling measures (auto first)
  PhysicalLimit physical;
  int table_world = 0;       // the world the automatic tables' cell was measured at ("table_world" in a row)
  std::string table_device;  // the GPU that cell was measured on ("table_device" in a row)
};

// Refusals that depend on the facts (UsageError, exit 2): MIG instances, --signal-scope device where not
// every rank is on one NVIDIA GPU, --protocol ll where its blocks cannot all be resident, --source-cache
// evict-first without cache hints on every rank (`ranks_without_hints` names them; `jit_arch`: this rank's
// kernels' arch,
// "" off CUDA's runtime).
void a2a_plan_refusals(const A2aConfig& cfg, const A2aFacts& f, const std::vector<int>& ranks_without_hints,
                       const std::string& jit_arch);

// The push kernel a row runs: protocol, blocks per peer, unroll, launch mode, signal scope, source cache.
// as_configured = false: auto's shape whatever --blocks-per-peer, --unroll and --source-cache say.
detail::PushSpec a2a_push_plan(const A2aConfig& cfg, const A2aFacts& f, Addressing a, bool sync,
                               std::size_t chunk, Protocol proto = Protocol::simple,
                               bool as_configured = true);

A2aChunkPlan a2a_chunk_plan(const A2aConfig& cfg, const A2aFacts& f, std::size_t chunk);

// Signals at GPU scope: every rank on this one NVIDIA GPU and --signal-scope not system.
bool a2a_device_scope(const A2aConfig& cfg, const A2aFacts& f);
// Blocks per peer the ll protocol may run (all its blocks resident at once); 0 = not even one.
int a2a_ll_block_limit(const A2aFacts& f, int world);
// Programmatic dependent launch exists (NVIDIA, compute capability 9.0 and newer).
bool a2a_overlapping_launch_exists(const A2aFacts& f);

}  // namespace mori::symm
