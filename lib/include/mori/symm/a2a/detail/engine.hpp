// SPDX-License-Identifier: MIT
// One backend of the all-to-all: enqueues the steps the driver (a2a.hpp) sequences. The GPU engine launches
// the kernels of kernels/a2a.hip; the host engine (lib/src/a2a/host_engine.cpp) runs the same algorithm over
// the same layout on the CPU. Neither knows about verification rounds, timing or references.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/jit/detail/kernel_abi.hpp"

namespace mori::symm {
class Jit;
class Window;
}  // namespace mori::symm

namespace mori::symm::detail {

// The receive layout (A2aLayout = MoriA2aLayout) and the mutation ids are kernels/abi.hip's (kernel_abi.hpp).
// Mutations used by the verification's own tests (MORI_FAULT a2a.no-barrier, a2a.stale, a2a.overrun).
enum Mutation : std::uint32_t {
  kMutateNoWait = MORI_MUTATE_NO_WAIT,
  kMutateStale = MORI_MUTATE_STALE,
  kMutateOverrun = MORI_MUTATE_OVERRUN
};

struct PushSpec {
  Addressing addressing = Addressing::ptr;
  bool sync = true;  // fused device synchronisation
  Protocol protocol = Protocol::simple;
  int blocks_per_peer = 1;
  int unroll = 4;
  bool overlap =
      true;  // launch so that the kernel's start overlaps its predecessor (Runtime::launch_overlapping)
  std::uint32_t mutate = 0;
  // Test-only (MORI_FAULT a2a.slow-kernel, docs/reliability.md): every block of the push waits this long
  // before its final signal (the host engine sleeps it once per push); 0 = off.
  std::uint64_t slow_ns = 0;
  bool device_scope =
      false;  // signals at GPU scope (every rank on this GPU; docs/mori-a2a.md "Signal scope")
  bool source_evict_first = false;  // source loads evict-first in L2 (docs/mori-a2a.md "Source cache")
};

// A captured sequence of engine steps, replayed as one launch. Destroys itself; never throws from the
// destructor.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  virtual void launch() = 0;
};

class A2aEngine {
 public:
  virtual ~A2aEngine() = default;

  // Steps, each enqueued in order (the host engine runs them at once).
  virtual void poison(std::size_t bytes) = 0;  // 0xFF over the first `bytes` of the local receive buffers
  virtual void fill(const A2aLayout& L) = 0;   // the source for the next launch, tagged with its epoch
  virtual void push(const A2aLayout& L, const PushSpec& s) = 0;
  virtual void delay(double us) = 0;            // this rank's stream idles
  virtual void verify(const A2aLayout& L) = 0;  // adds the wrong words of the last launch to the counter
  // The same bytes into the same destinations by the copy engines, one stream per peer (host: memcpy).
  virtual void copy_peers(const A2aLayout& L) = 0;

  // Waits for everything enqueued. Throws TimeoutError naming the missing ranks when a kernel's bounded wait
  // expired.
  virtual void sync() = 0;
  virtual std::uint64_t take_wrong() = 0;  // sync, then read and reset the counter
  // n calls of fn back to back; microseconds per call (GPU: events between launches; host: wall clock).
  virtual std::vector<double> time_each(int n, const std::function<void()>& fn) = 0;
  // fn's steps captured as one graph; null where the backend has none.
  virtual std::unique_ptr<CapturedGraph> capture(const std::function<void()>& fn) = 0;

  virtual std::string copy_kind() const = 0;    // "copy_engine" | "host_memcpy"
  virtual const char* push_launch() const = 0;  // how the last push was launched: "programmatic" | "plain"
  virtual double default_skew_us() const = 0;   // long enough to expose a missing barrier
  virtual const Jit* jit() const = 0;           // null where nothing is compiled
  // Blocks of this push kernel the whole device holds at once (multiprocessors x blocks per multiprocessor).
  virtual long resident_blocks(const PushSpec& s) = 0;
};

struct EngineContext {
  Runtime& rt;
  Window& win;
  int me = 0;
  int world = 1;
  int device = 0;
  double timeout_s = 60;
  std::size_t src_bytes = 0;  // the source: world slots of the largest pitch
  // Names ranks of this team as errors do (Bootstrap::name_ranks: the job's ranks, the node first).
  std::function<std::string(const std::vector<int>&)> name_ranks;
};

// The instantiation of kernels/a2a.hip that runs this push (one of kernel_catalog's).
std::string a2a_kernel_name(const PushSpec& s);

// The engine of the runtime's platform.
std::unique_ptr<A2aEngine> make_a2a_engine(const EngineContext& ctx);
std::unique_ptr<A2aEngine> make_gpu_a2a_engine(const EngineContext& ctx);
std::unique_ptr<A2aEngine> make_host_a2a_engine(const EngineContext& ctx);

}  // namespace mori::symm::detail
