// SPDX-License-Identifier: MIT
// The all-to-all's GPU engine: launches the kernels of kernels/a2a.hip on one stream (docs/mori-a2a.md
// "The contract"). Peer copies for the ceiling fork to one stream per peer and join back, so they run
// concurrently and can be captured into a graph.
#include <algorithm>
#include <map>
#include <string>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/platform/detail/owned.hpp"
#include "mori/symm/window/window.hpp"

namespace mori::symm::detail {
namespace {

constexpr int kThreads = 512;
constexpr unsigned kAuxThreads = 256;

using detail::OwnedBuffer;
using detail::OwnedEvent;
using detail::OwnedStream;

// The push kernel's instantiation (a2a_push or a2a_ll), typed by its argument struct.
KernelName<A2aPushArgs> push_kernel_name(const PushSpec& sp) {
  const bool lsa = sp.addressing == Addressing::lsa;
  return sp.sync && sp.protocol == Protocol::ll
             ? a2a_ll_name(lsa)
             : a2a_push_name(lsa, sp.sync, sp.unroll, sp.protocol == Protocol::direct, sp.source_evict_first);
}

// A replay advances the device epoch by the launches it captured; the engine's host copy of the epoch
// follows. A graph holding the copy protocol's copies holds fixed receive buffers: it may only start at the
// parity it was captured at (validate_a2a keeps the launches per graph even, so replays keep it).
class GpuGraph final : public CapturedGraph {
 public:
  GpuGraph(Runtime& rt, GraphExec g, Stream s, std::uint32_t* epoch, std::uint32_t launches, int fixed_parity)
      : rt_(rt), g_(g), s_(s), epoch_(epoch), launches_(launches), fixed_parity_(fixed_parity) {}
  ~GpuGraph() override { rt_.graph_destroy(g_); }
  GpuGraph(const GpuGraph&) = delete;
  GpuGraph& operator=(const GpuGraph&) = delete;
  void launch() override {
    if (fixed_parity_ >= 0 && static_cast<int>(*epoch_ & 1u) != fixed_parity_)
      throw Error(ExitCode::runtime,
                  "a2a copy protocol: a graph captured at epoch parity " + std::to_string(fixed_parity_) +
                      " replayed at the other parity (an odd number of launches ran in between)");
    rt_.graph_launch(g_, s_);
    *epoch_ += launches_;
  }

 private:
  Runtime& rt_;
  GraphExec g_;
  Stream s_;
  std::uint32_t* epoch_;
  std::uint32_t launches_;
  int fixed_parity_;
};

class GpuEngine final : public A2aEngine {
 public:
  explicit GpuEngine(const EngineContext& c)
      : c_(c),
        sms_(c.rt.device_info(c.device).multiprocessors),
        clock64_khz_(c.rt.device_info(c.device).clock64_khz),
        jit_(target_arch(c.rt, c.device), to_string(c.rt.platform()),
             c.rt.device_info(c.device).wall_clock_khz),
        module_(c.rt, compile(jit_)),
        stream_(c.rt),
        src_(c.rt, c.src_bytes),
        // Word 0..1: the wrong counter (u64); word 2: the epoch of the launch that timed out (0 = none); word
        // 3 + q: rank q missing in that launch.
        status_(c.rt, 4 * (3 + static_cast<std::size_t>(c.world))) {
    c_.rt.memset_async(status_.p, 0, 4 * (3 + static_cast<std::size_t>(c_.world)), stream_.get());
    sync();
    c_.rt.copy_to_host(&epoch_, epoch_ptr(), sizeof(epoch_));
  }

  void poison(std::size_t bytes) override { c_.rt.memset_async(c_.win.local(), 0xFF, bytes, stream_.get()); }

  void fill(const A2aLayout& L) override {
    const A2aFillArgs a{src_.p, c_.world, c_.me, L, epoch_ptr()};
    detail::launch(c_.rt, kernel(module_, a2a_fill_name()), {aux_blocks()}, {kAuxThreads}, 0, stream_.get(),
                   a);
  }

  void push(const A2aLayout& L, const PushSpec& sp) override {
    if (sp.sync && sp.protocol == Protocol::copy) return push_copy(L, sp);
    launch_push(L, sp);
  }

  long resident_blocks(const PushSpec& sp) override {
    const auto name = push_kernel_name(sp);
    auto it = resident_.find(name.name);
    if (it == resident_.end())
      it = resident_
               .emplace(name.name,
                        static_cast<long>(std::max(sms_, 1)) *
                            resident_blocks_per_multiprocessor(c_.rt, kernel(module_, name), kThreads))
               .first;
    return it->second;
  }

  // Every launch of a push kernel advances the device epoch by one (its last block does); epoch_ counts them
  // as enqueued, so the host knows the parity of the next launch.
  void launch_push(const A2aLayout& L, const PushSpec& sp) {
    const auto k = kernel(module_, push_kernel_name(sp));
    const auto lsa = c_.win.lsa();
    A2aPushArgs a{};
    a.src = src_.p;
    a.peers = c_.win.peer_ptrs_device();
    a.lsa_base = static_cast<char*>(lsa.base);
    a.stride = lsa.stride;
    a.world = c_.world;
    a.me = c_.me;
    a.layout = L;
    a.blocks_per_peer = sp.blocks_per_peer;
    a.timeout_ns = static_cast<std::uint64_t>(c_.timeout_s * 1e9);
    a.mutate = sp.mutate;
    a.slow_cycles = slow_cycles(sp.slow_ns);
    a.status = static_cast<std::uint32_t*>(status_.p) + 2;
    a.device_scope = sp.device_scope ? 1 : 0;
    a.source_evict_first = sp.source_evict_first ? 1 : 0;  // a2a_ll's; a2a_push's is a template argument
    const auto grid = static_cast<unsigned>(c_.world * sp.blocks_per_peer);
    if (sp.overlap) {
      overlapped_ = detail::launch_overlapping(c_.rt, k, grid, kThreads, stream_.get(), a);
    } else {
      detail::launch(c_.rt, k, {grid}, {kThreads}, 0, stream_.get(), a);
      overlapped_ = false;
    }
    ++epoch_;
  }

  // The copy protocol (docs/mori-a2a.md "Synchronisation and protocols"): the copy engines write this rank's
  // chunks into every peer's receive buffer of the next launch's parity, then simple's barrier runs as a
  // zero-byte launch. Stream order completes the copies before that kernel starts; its system-scope fence and
  // flags then publish them as they publish a kernel's own stores (at system scope: a2a.cpp spec() never
  // gives the copy protocol device scope). The copies cannot read the status word, so after an expired wait
  // they still run (the barrier behind them sends nothing).
  void push_copy(const A2aLayout& L, const PushSpec& sp) {
    if (L.chunk && !(sp.mutate & kMutateStale)) {
      copy_to_peers(L, (epoch_ & 1u) * L.region, (sp.mutate & kMutateOverrun) != 0);
      copied_since_capture_ = true;
    }
    PushSpec barrier = sp;
    barrier.mutate = sp.mutate & kMutateNoWait;  // stale and overrun act on the copies above, not here
    // simple's barrier, with the caller's one block per peer and plain launch (a2a.cpp spec)
    barrier.protocol = Protocol::simple;
    A2aLayout none = L;
    none.chunk = 0;
    launch_push(none, barrier);
  }

  void delay(double us) override {
    const A2aDelayArgs a{static_cast<std::uint64_t>(us * 1e3)};
    detail::launch(c_.rt, kernel(module_, a2a_delay_name()), {1}, {32}, 0, stream_.get(), a);
  }

  void verify(const A2aLayout& L) override {
    const A2aVerifyArgs a{
        c_.win.local(), c_.world, c_.me, L, epoch_ptr(), static_cast<unsigned long long*>(status_.p)};
    detail::launch(c_.rt, kernel(module_, a2a_verify_name()), {aux_blocks()}, {kAuxThreads}, 0, stream_.get(),
                   a);
  }

  void copy_peers(const A2aLayout& L) override { copy_to_peers(L, 0, false); }

  // Chunk p of the source into rank p's receive slot `me`, `offset` bytes into its window, by the copy
  // engines, one stream per peer forked from and joined back into the engine's stream. Overrun (the
  // verification's own test): 16 bytes past each chunk.
  void copy_to_peers(const A2aLayout& L, std::uint64_t offset, bool overrun) {
    ensure_side_streams();
    c_.rt.event_record(fork_->get(), stream_.get());
    for (int k = 0; k < c_.world; ++k) {
      const int p = (c_.me + k) % c_.world;
      auto& side = side_[static_cast<std::size_t>(k)];
      c_.rt.stream_wait_event(side.get(), fork_->get());
      char* dst = static_cast<char*>(c_.win.peer_ptrs()[static_cast<std::size_t>(p)]) + offset +
                  static_cast<std::size_t>(c_.me) * L.pitch;
      c_.rt.copy_async(dst, static_cast<const char*>(src_.p) + static_cast<std::size_t>(p) * L.pitch, L.chunk,
                       side.get());
      if (overrun) c_.rt.memset_async(dst + (L.chunk + 15) / 16 * 16, 0x5A, 16, side.get());
      c_.rt.event_record(joins_[static_cast<std::size_t>(k)].get(), side.get());
      c_.rt.stream_wait_event(stream_.get(), joins_[static_cast<std::size_t>(k)].get());
    }
  }

  void sync() override {
    c_.rt.stream_sync(stream_.get());
    std::vector<std::uint32_t> st(1 + static_cast<std::size_t>(c_.world));
    c_.rt.copy_to_host(st.data(), static_cast<std::uint32_t*>(status_.p) + 2, st.size() * 4);
    if (!st[0]) return;
    std::vector<int> missing;
    for (int q = 0; q < c_.world; ++q)
      if (st[1 + static_cast<std::size_t>(q)]) missing.push_back(q);
    throw TimeoutError(
        "a2a device barrier: " + rank_tag() + " waited more than " + std::to_string(c_.timeout_s) +
        " s; ranks not arrived: " + (c_.name_ranks ? c_.name_ranks(missing) : detail::join_ranks(missing)));
  }

  std::uint64_t take_wrong() override {
    sync();
    std::uint64_t wrong = 0;
    c_.rt.copy_to_host(&wrong, status_.p, sizeof(wrong));
    c_.rt.memset_async(status_.p, 0, sizeof(wrong), stream_.get());
    c_.rt.stream_sync(stream_.get());
    return wrong;
  }

  std::vector<double> time_each(int n, const std::function<void()>& fn) override {
    while (events_.size() < static_cast<std::size_t>(n) + 1) events_.emplace_back(c_.rt);
    for (int i = 0; i < n; ++i) {
      c_.rt.event_record(events_[static_cast<std::size_t>(i)].get(), stream_.get());
      fn();
    }
    c_.rt.event_record(events_[static_cast<std::size_t>(n)].get(), stream_.get());
    sync();
    std::vector<double> us(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < us.size(); ++i)
      us[i] = 1000.0 * c_.rt.event_elapsed_ms(events_[i].get(), events_[i + 1].get());
    return us;
  }

  std::unique_ptr<CapturedGraph> capture(const std::function<void()>& fn) override {
    // Captured launches run only when the graph is launched: the host's epoch advances then, not now.
    const std::uint32_t start = epoch_;
    copied_since_capture_ = false;
    c_.rt.capture_begin(stream_.get());
    try {
      fn();
    } catch (...) {
      epoch_ = start;
      try {
        c_.rt.graph_destroy(c_.rt.capture_end(stream_.get()));
      } catch (...) {
      }
      throw;
    }
    const std::uint32_t launches = epoch_ - start;
    epoch_ = start;
    return std::make_unique<GpuGraph>(c_.rt, c_.rt.capture_end(stream_.get()), stream_.get(), &epoch_,
                                      launches, copied_since_capture_ ? static_cast<int>(start & 1u) : -1);
  }

  std::string copy_kind() const override { return "copy_engine"; }
  const char* push_launch() const override { return overlapped_ ? "programmatic" : "plain"; }
  double default_skew_us() const override { return 50; }
  const Jit* jit() const override { return &jit_; }

 private:
  static CompiledKernels compile(Jit& jit) {
    // The all-to-all uses the catalog's first entry; MORI_PRECOMPILE=1 builds the rest up front too.
    const auto catalog = kernel_catalog(jit.arch());
    auto compiled = jit.get(catalog[0]);
    if (Jit::precompile_requested())
      for (std::size_t i = 1; i < catalog.size(); ++i) jit.get(catalog[i]);
    return compiled;
  }
  // The test-only delay of MORI_FAULT a2a.slow-kernel in the kernels' clock64() cycles (at the peak clock: a
  // lower clock makes the wait longer, never shorter).
  std::uint64_t slow_cycles(std::uint64_t ns) const {
    if (!ns) return 0;
    if (!clock64_khz_)
      throw Error(ExitCode::runtime,
                  "MORI_FAULT a2a.slow-kernel: the device reports no clock rate to wait by");
    return std::max<std::uint64_t>(1,
                                   static_cast<std::uint64_t>(static_cast<double>(ns) * clock64_khz_ / 1e6));
  }
  unsigned aux_blocks() const { return static_cast<unsigned>(std::max(sms_, 1)) * 4; }
  const std::uint32_t* epoch_ptr() const {
    return reinterpret_cast<const std::uint32_t*>(static_cast<const char*>(c_.win.local()) +
                                                  c_.win.layout().signal_offset +
                                                  4 * MORI_SIGNAL_PAD_EPOCH_WORD);
  }
  void ensure_side_streams() {
    if (fork_) return;
    fork_ = std::make_unique<OwnedEvent>(c_.rt);
    for (int k = 0; k < c_.world; ++k) {
      side_.emplace_back(c_.rt);
      joins_.emplace_back(c_.rt);
    }
  }

  EngineContext c_;
  bool overlapped_ = false;
  std::uint32_t epoch_ = 0;  // the device epoch once everything enqueued so far has run
  bool copied_since_capture_ = false;
  int sms_;
  std::uint64_t clock64_khz_;
  Jit jit_;
  KernelModule module_;
  OwnedStream stream_;
  OwnedBuffer src_;
  OwnedBuffer status_;
  std::vector<OwnedEvent> events_;
  std::unique_ptr<OwnedEvent> fork_;
  std::vector<OwnedStream> side_;
  std::vector<OwnedEvent> joins_;
  std::map<std::string, long> resident_;  // resident_blocks per kernel instantiation, asked once
};

}  // namespace

std::string a2a_kernel_name(const PushSpec& sp) {
  return push_kernel_name(sp).name;
}

std::unique_ptr<A2aEngine> make_gpu_a2a_engine(const EngineContext& ctx) {
  return std::make_unique<GpuEngine>(ctx);
}

std::unique_ptr<A2aEngine> make_a2a_engine(const EngineContext& ctx) {
  return ctx.rt.platform() == Platform::host ? make_host_a2a_engine(ctx) : make_gpu_a2a_engine(ctx);
}

}  // namespace mori::symm::detail
