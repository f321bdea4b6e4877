// SPDX-License-Identifier: MIT
// The all-to-all's types (docs/mori-a2a.md): its enumerations, its configuration (the options, parsed and
// validated in lib/src/a2a/config.cpp) and one row of its result (written out by a2a/row.hpp). No behaviour
// lives here: the plan is a2a/plan.hpp, the driver a2a/a2a.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mori/symm/comm/stats.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

enum class Addressing { ptr, lsa };
enum class SyncMode { host, device };
// How device sync signals (docs/mori-a2a.md "Synchronisation and protocols"): simple = the last block fences
// at system scope and stores one flag per peer; direct = every block adds to its destination's counter with
// release semantics; ll = low latency, the flag travels in every 64-bit word of the data (twice the bytes, no
// fence, no barrier); copy = the copy engines move the chunks, then a kernel runs simple's barrier.
enum class Protocol { simple, direct, ll, copy };
// Memory scope of the device-sync signals (--signal-scope; docs/mori-a2a.md "Signal scope"): system, or
// device where every rank runs on one NVIDIA GPU (ranks sharing it under MPS); auto takes device there.
enum class SignalScope { auto_select, system, device };
// L2 policy of the kernels' source loads (--source-cache; docs/mori-a2a.md "Source cache"): normal, or
// evict-first (NVIDIA sm_80+); auto takes evict-first where ranks share one GPU and the working set does not
// fit in its L2 (auto_source_evict_first).
enum class SourceCache { auto_select, normal, evict_first };
const char* to_string(Addressing a) noexcept;
const char* to_string(SyncMode s) noexcept;
const char* to_string(Protocol p) noexcept;

struct A2aConfig {
  std::vector<std::size_t> chunks;  // bytes per (source, destination) pair
  std::vector<Addressing> addressing = {Addressing::ptr, Addressing::lsa};
  std::vector<SyncMode> syncs = {SyncMode::host, SyncMode::device};
  int graph = 0;  // K > 0: also capture K iterations (push + device barrier) in a graph and replay it
  std::vector<Protocol> protocols;  // empty = auto (per placement, from measurements)
  int blocks_per_peer = 0;          // 0 = auto
  int unroll = 0;                   // 16-byte loads in flight per thread before its stores: 4, 8, or 0 = auto
  bool overlap_launch = true;  // pushes launched to overlap their predecessor where it exists (--launch):
                               // CUDA sm_90+, one rank per GPU or two launches of every rank of the
                               // GPU resident at once
  SignalScope signal_scope = SignalScope::auto_select;
  SourceCache source_cache = SourceCache::auto_select;
  int warmup = 5;
  int iters = 20;
  int verify_epochs =
      4;  // back-to-back verified iterations per configuration (graph: captured, replayed twice)
  double skew_us = -1;  // delay of odd ranks before each verified push; < 0 = the backend's default
  bool allow_time_slicing = false;        // device sync on ranks that share a GPU without MPS
  std::optional<HandleType> handle_type;  // --handle-type; none = auto (chosen by trying)
  std::size_t stride_quantum = 0;
};

// One candidate of the copy ceiling, as measured.
struct CeilingSample {
  std::string kind;  // "sm_copy" | "copy_engine" | "host_memcpy"
  bool graph = false;
  int round = 0;
  double gbps = 0;  // all chunks of all ranks / p50 of the per-iteration maximum over ranks
  int blocks_per_peer = 0, unroll = 0;  // the SM copy's kernel shape (0 for the other kinds)
  std::string source_cache;             // the SM copy's source loads: "normal" | "evict_first" ("" otherwise)
};

struct Ceiling {
  double gbps = 0;  // best of all samples
  std::string kind;
  bool graph = false;
  double spread = 0;  // |round 1 - round 2| / max, of the winning kind, shape and mode
  std::vector<CeilingSample> samples;
};

// The physical limit of total_bw_gbps, from device facts read at run time; nullopt gbps with the reason.
struct PhysicalLimit {
  std::optional<double> gbps;
  std::string source;
  bool l2_resident = false;  // the working set fits in L2: copies may beat the HBM figure
};

struct A2aResult {
  std::size_t chunk_bytes = 0;
  Addressing addressing = Addressing::ptr;
  SyncMode sync = SyncMode::host;
  bool graph = false;
  int graph_iters = 0;
  Protocol protocol = Protocol::simple;
  int blocks_per_peer = 0;
  int unroll = 0;
  std::string launch = "plain";       // how the timed pushes were launched: "programmatic" | "plain"
  std::string signal_scope = "none";  // of the device signals: "system" | "device" | "none" (host sync)
  std::string placement = "one_gpu";  // the plan's placement class (a2a/plan.hpp PlacementClass)
  int table_world = 0;  // the world the automatic tables' cell was measured at (a2a/plan.hpp A2aTableCell)
  std::string table_device;           // the GPU that cell was measured on (a2a/plan.hpp A2aTableCell)
  std::string source_cache = "none";  // the kernels' source loads: "normal" | "evict_first" | "none" (copy)
  int iters = 0;                      // timed iterations (graph: replays x graph_iters)
  TimeStats time_us;
  std::optional<double> launch_us;  // p50 of the host time of one iteration's launch call(s) (row_run.cpp)
  double push_only_us = 0;          // p50 of the same push with no synchronisation, same launch mode
  double sync_only_us = 0;          // p50 of the synchronisation alone (zero bytes), same launch mode
  double agg_bw_gbps = 0, total_bw_gbps = 0, algbw_gbps = 0, busbw_gbps = 0;
  Ceiling ceiling;
  PhysicalLimit physical;
  int verified_epochs = 0;
  double skew_us = 0;
  std::uint64_t wrong = 0;
  std::vector<int> wrong_ranks;  // the job's ranks whose receive buffer held the wrong elements, ascending
  // The load/store team that ran the row (docs/mori-a2a.md "Many nodes"): its node as users name it (the
  // host, or --node-id), its ranks in the job ("0-3"), its size. One team on a one-node job.
  std::string team_node;
  std::string team_ranks;
  int team_size = 0;
};

// Validates everything that needs no allocation; throws UsageError naming the option and the accepted range.
// device_memory: bytes of the device (0 = unknown).
void validate_a2a(const A2aConfig& c, int world, std::uint64_t device_memory, bool host_runtime);

// Parses --protocol: a comma-separated list of simple, direct, ll, copy, or both (simple,direct), all (the
// four), auto (empty).
std::vector<Protocol> parse_protocols(const std::string& text);
// Parses --signal-scope: auto, system or device.
SignalScope parse_signal_scope(const std::string& text);
// Parses --source-cache: auto, normal or evict-first.
SourceCache parse_source_cache(const std::string& text);

}  // namespace mori::symm
