// The one-shot all-to-all benchmark engine behind mori-a2a (DESIGN.md §6).
//
// Every rank pushes chunk p of its source buffer into rank p's window at offset rank * chunk (self included),
// then all ranks synchronise; repeat. Each configuration is verified (poisoned destinations, every element
// checked, counts summed over ranks) in iterations separate from the timed ones, and timed against the
// platform's own copy of the same bytes, measured in the same run.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "mori/symm/report.hpp"
#include "mori/symm/tool.hpp"

namespace mori::symm {

enum class Addressing { ptr, lsa };
enum class SyncMode { host, device };
const char* to_string(Addressing a) noexcept;
const char* to_string(SyncMode s) noexcept;

struct A2aConfig {
  std::vector<std::size_t> chunks;  // bytes per (source, destination) pair
  std::vector<Addressing> addressing = {Addressing::ptr, Addressing::lsa};
  std::vector<SyncMode> syncs = {SyncMode::host, SyncMode::device};
  int graph = 0;  // K > 0: also capture K iterations (push + device barrier) in a graph and replay it
  int blocks_per_peer = 0;  // 0 = auto
  int unroll = 0;           // 16-byte loads in flight per thread before its stores: 4, 8, or 0 = auto
  int warmup = 5;
  int iters = 20;
  std::string handle_type = "auto";
  std::size_t stride_quantum = 0;
};

struct TimeStats {
  double min = 0, p50 = 0, p95 = 0, max = 0, mean = 0;  // microseconds
};
TimeStats time_stats(std::vector<double> us);

struct A2aResult {
  std::size_t chunk_bytes = 0;
  Addressing addressing = Addressing::ptr;
  SyncMode sync = SyncMode::host;
  bool graph = false;
  int graph_iters = 0;
  int blocks_per_peer = 0;
  int unroll = 0;
  int iters = 0;
  TimeStats time_us;
  double kernel_us_p50 = 0;  // host sync: the kernel alone (events), without launch and barrier
  double agg_bw_gbps = 0, total_bw_gbps = 0, algbw_gbps = 0, busbw_gbps = 0;
  double ceiling_bw_gbps = 0;     // the better of the two below
  double ceiling_plain_gbps = 0;  // copies launched back to back
  double ceiling_graph_gbps = 0;  // the same copies captured in a graph (GPU only)
  std::string ceiling_kind;
  std::uint64_t wrong = 0;
};

// Validates everything that needs no allocation; throws UsageError naming the option and the accepted range.
// device_memory: bytes of the device (0 = unknown).
void validate_a2a(const A2aConfig& c, int world, std::uint64_t device_memory, bool host_runtime);

// Parses "256K", "64M", "1G", "4096" (bytes); throws UsageError naming `option`.
std::size_t parse_size(const std::string& option, const std::string& text);

// unroll when not given: 8 from 16 MiB chunks (measured 1.3% faster there on the H200), else 4 (2-3% faster
// at 256 KiB).
int auto_unroll(std::size_t chunk_bytes);

// blocks_per_peer when not given: enough blocks to fill the device, never more than the chunk has work for.
int auto_blocks_per_peer(int multiprocessors, int world, std::size_t chunk_bytes, int threads);

class A2aBench {
 public:
  A2aBench(ToolEnv& env, const A2aConfig& cfg);
  ~A2aBench();
  A2aBench(const A2aBench&) = delete;
  A2aBench& operator=(const A2aBench&) = delete;

  // progress(line) is called on rank 0 once per chunk size.
  std::vector<A2aResult> run(const std::function<void(const std::string&)>& progress);
  std::string handle_type() const;
  Json jit_json() const;
  Json extra_meta() const;

 private:
  struct Impl;
  Impl* impl_;
};

Json to_json(const A2aResult& r);

}  // namespace mori::symm
