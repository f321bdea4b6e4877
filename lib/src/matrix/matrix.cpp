// SPDX-License-Identifier: MIT
// The peer matrix's measurement (matrix.hpp; docs/mori-probe.md "Peer matrix"): each source rank writes,
// reads and ping-pongs its pairs through one symmetric window; the rows are gathered in gather.cpp and
// reported in report.cpp.
#include "mori/symm/matrix/matrix.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "gather.hpp"
#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/detail/poll.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/jit/detail/kernel_abi.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/matrix/detail/matrix_write.hpp"
#include "mori/symm/platform/detail/owned.hpp"
#include "mori/symm/window/window.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;
using detail::kNotMeasured;
using detail::OwnedBuffer;
using detail::OwnedEvent;
using detail::OwnedStream;

// What only the GPU runtime needs, each resource with its owner: the matrix kernels, a stream, the two events
// that time it, and the ping-pong's round-trip times and result.
struct Gpu {
  Gpu(Runtime& rt, int device, int rounds)
      : jit(target_arch(rt, device), to_string(rt.platform()), rt.device_info(device).wall_clock_khz),
        mod(rt, matrix_kernels(jit)),
        stream(rt),
        e0(rt),
        e1(rt),
        times(rt, static_cast<std::size_t>(rounds) * 8),
        result(rt, 8) {}

  static CompiledKernels matrix_kernels(Jit& j) {
    for (const auto& spec : kernel_catalog(j.arch()))
      if (spec.file == "matrix.hip") return j.get(spec);
    throw ApiError("kernel_catalog", __FILE__, __LINE__, "KERNEL_NOT_FOUND", "no matrix.hip entry");
  }

  Jit jit;
  KernelModule mod;
  OwnedStream stream;
  OwnedEvent e0, e1;
  OwnedBuffer times, result;
};

struct Ctx {
  Ctx(Bootstrap& b, Runtime& r, Window& win, const MatrixOptions& opt)
      : boot(b), rt(r), w(win), o(opt), scratch(r, opt.bytes), sink(r, opt.bytes) {}
  Bootstrap& boot;
  Runtime& rt;
  Window& w;
  const MatrixOptions& o;
  OwnedBuffer scratch;       // a plain local buffer of o.bytes holding the pattern: the source of every write
  OwnedBuffer sink;          // another: the destination of the reads and the poison of every write check
  std::unique_ptr<Gpu> gpu;  // null on the host runtime
  std::uint32_t next_round = 1;
  WriteChoice write;                  // this rank's write kernel, decided once before it measures
  std::vector<WriteChoice> variants;  // --write-kernel all

  Stream stream() const noexcept { return gpu ? gpu->stream.get() : nullptr; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The peer's slot as the kernel forms it: from the pointer array, or LSA base + team rank x stride.
char* peer_base(Ctx& c, int peer, int lsa) {
  if (!lsa) return static_cast<char*>(c.w.peer_ptrs()[static_cast<std::size_t>(peer)]);
  const auto l = c.w.lsa();
  return static_cast<char*>(l.base) + l.stride * static_cast<std::uint64_t>(c.boot.team_rank_of(peer));
}

// GB/s of o.bytes for each of `runs` on the stream: the medians of o.iterations rounds that run each once,
// interleaved so that every run sees the same state of the machine, after one warm-up round.
std::vector<double> gpu_gbps(Ctx& c, const std::vector<std::function<void()>>& runs) {
  std::vector<std::vector<double>> ms(runs.size());
  for (int i = 0; i <= c.o.iterations; ++i)
    for (std::size_t k = 0; k < runs.size(); ++k) {
      c.rt.event_record(c.gpu->e0.get(), c.stream());
      runs[k]();
      c.rt.event_record(c.gpu->e1.get(), c.stream());
      c.rt.event_sync(c.gpu->e1.get());
      if (i) ms[k].push_back(c.rt.event_elapsed_ms(c.gpu->e0.get(), c.gpu->e1.get()));
    }
  std::vector<double> gbps;
  for (auto& m : ms) gbps.push_back(static_cast<double>(c.o.bytes) / (median(m) * 1e6));
  return gbps;
}

// Test-only (MORI_FAULT=matrix.slow-pair:<rank>): that rank's transfers to the next rank of its team are
// slowed, a degraded pair for mori-probe --health to name (docs/mori-probe.md "Health").
bool slow_pair(Ctx& c, int peer) {
  if (!detail::fault_armed("matrix.slow-pair", c.boot.rank())) return false;
  const auto& team = c.boot.team();
  const auto me = std::find(team.begin(), team.end(), c.boot.rank());
  if (me == team.end()) return false;
  return peer == team[static_cast<std::size_t>(me - team.begin() + 1) % team.size()];
}

// The host runtime's copy between a local buffer and peer's slot: GB/s of memcpy.
double host_gbps(Ctx& c, int peer, int lsa, int read) {
  std::vector<double> ms;
  char* remote = peer_base(c, peer, lsa);
  const bool slow = slow_pair(c, peer);
  for (int i = 0; i <= c.o.iterations; ++i) {
    const auto t0 = Clock::now();
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::memcpy(read ? c.sink.p : remote, read ? remote : c.scratch.p, c.o.bytes);
    if (i) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return static_cast<double>(c.o.bytes) / (median(ms) * 1e6);
}

// Read bandwidth: the load/store kernel copies peer's slot into the local sink buffer.
double read_bandwidth(Ctx& c, int peer, int lsa) {
  if (!c.gpu) return host_gbps(c, peer, lsa, 1);
  // The read direction: 4 loads in flight, plain stores.
  const auto f = detail::kernel(c.gpu->mod, detail::matrix_copy_name(lsa != 0, 4, false));
  detail::MatrixCopyArgs a{};
  a.peers = c.w.peer_ptrs_device();
  a.lsa_base = static_cast<char*>(c.w.lsa().base);
  a.stride = c.w.lsa().stride;
  a.n16 = c.o.bytes / 16;
  a.idx = lsa ? c.boot.team_rank_of(peer) : peer;
  a.read = 1;
  a.local = c.sink.p;
  const unsigned blocks = static_cast<unsigned>(c.rt.device_info(c.w.options().device).multiprocessors) * 4;
  return gpu_gbps(c, {[&] { detail::launch(c.rt, f, {blocks}, {512}, 0, c.stream(), a); }})[0];
}

// Whether one `write` puts exactly the pattern into peer's slot: the slot is poisoned first (by the copy
// engine on the GPU), then written once and read back.
bool write_once_and_check(Ctx& c, int peer, const std::function<void()>& write) {
  char* remote = peer_base(c, peer, 0);
  c.rt.memset_async(c.sink.p, 0xff, c.o.bytes, c.stream());
  c.rt.copy_async(remote, c.sink.p, c.o.bytes, c.stream());
  write();
  c.rt.stream_sync(c.stream());
  return detail::holds_pattern(c.rt, remote, c.o.bytes, c.boot.rank());
}

// Write kernel w into peer's slot: its GB/s, on the GPU the copy engine's write of the same bytes to the same
// slot (the baseline the kernel is judged against) timed interleaved with it, and whether one write checked
// out (write_once_and_check).
WriteMeasure write_bandwidth(Ctx& c, int peer, int lsa, const WriteChoice& w) {
  WriteMeasure m;
  m.kernel = w;
  if (!c.gpu) {
    char* remote = peer_base(c, peer, lsa);
    // Test-only: a write that leaves its last 16 bytes out, which the check must catch.
    const std::size_t n = c.o.bytes - (detail::fault_armed("matrix.short-write", c.boot.rank()) ? 16 : 0);
    m.verified = write_once_and_check(c, peer, [&] { std::memcpy(remote, c.scratch.p, n); });
    m.gbps = Measured::of(host_gbps(c, peer, lsa, 0));
    m.copy_engine_gbps = Measured::none("host runtime: no copy engine, every write is a memcpy");
    return m;
  }
  detail::WriteArgs a;
  a.peers = const_cast<void**>(c.w.peer_ptrs_device());
  a.lsa_base = static_cast<char*>(c.w.lsa().base);
  a.stride = c.w.lsa().stride;
  a.idx = lsa ? c.boot.team_rank_of(peer) : peer;
  a.lsa = lsa;
  a.local = c.scratch.p;
  a.bytes = c.o.bytes;
  const auto kernel = [&] { detail::launch_write(c.rt, c.gpu->mod, w, a, c.stream()); };
  m.verified = write_once_and_check(c, peer, kernel);
  char* remote = peer_base(c, peer, 0);
  const auto g = gpu_gbps(c, {[&] { c.rt.copy_async(remote, c.scratch.p, c.o.bytes, c.stream()); }, kernel});
  m.copy_engine_gbps = Measured::of(g[0]);
  m.gbps = Measured::of(g[1]);
  return m;
}

// Bounded wait until *flag reaches round v (wrapping compare); false on timeout.
bool host_wait(std::uint32_t* flag, std::uint32_t v, Clock::time_point deadline) {
  std::atomic_ref<std::uint32_t> a(*flag);
  // Oversubscribed hosts: yield after a short spin to let the peer run.
  return detail::poll_until(
      [&] { return static_cast<std::int32_t>(a.load(std::memory_order_acquire) - v) >= 0; }, deadline,
      detail::Backoff::spin_then_yield(64));
}

// The ping-pong on the host runtime: round-trip times in ns (initiator), or the 1-based round that timed out.
std::uint64_t host_pingpong(Ctx& c, int peer, int lsa, bool initiator, std::uint32_t first,
                            std::vector<double>& ns) {
  char* remote = peer_base(c, peer, lsa);
  auto* peer_pad = reinterpret_cast<std::uint32_t*>(remote + c.w.layout().signal_offset);
  auto* my_pad = static_cast<std::uint32_t*>(c.w.signal_pad(c.boot.rank()));
  const auto bound = std::chrono::duration<double>(c.boot.timeout_s());
  const bool mute =
      detail::fault_armed("matrix.no-pong", c.boot.rank());  // test-only: a responder that never answers
  for (int r = 0; r < c.o.rounds; ++r) {
    const std::uint32_t v = first + static_cast<std::uint32_t>(r);
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(bound);
    if (!initiator && !host_wait(my_pad + 0, v, deadline)) return static_cast<std::uint64_t>(r) + 1;
    if (mute && !initiator) continue;
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(remote))
        .store(v, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(peer_pad[initiator ? 0 : 1]).store(v, std::memory_order_release);
    if (initiator) {
      if (!host_wait(my_pad + 1, v, deadline)) return static_cast<std::uint64_t>(r) + 1;
      ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    }
  }
  return 0;
}

std::uint64_t gpu_pingpong(Ctx& c, int peer, int lsa, bool initiator, std::uint32_t first,
                           std::vector<double>& ns) {
  const auto f = detail::kernel(c.gpu->mod, detail::matrix_pingpong_name(lsa != 0));
  detail::MatrixPingpongArgs a{};
  a.peers = c.w.peer_ptrs_device();
  a.lsa_base = static_cast<char*>(c.w.lsa().base);
  a.stride = c.w.lsa().stride;
  a.signal_offset = c.w.layout().signal_offset;
  a.timeout_ns = static_cast<std::uint64_t>(c.boot.timeout_s() * 1e9);
  a.idx = lsa ? c.boot.team_rank_of(peer) : peer;
  a.initiator = initiator ? 1 : 0;
  a.my_pad = static_cast<std::uint32_t*>(c.w.signal_pad(c.boot.rank()));
  a.first_round = first;
  a.rounds = static_cast<std::uint32_t>(c.o.rounds);
  a.times = static_cast<unsigned long long*>(c.gpu->times.p);
  a.result = static_cast<unsigned long long*>(c.gpu->result.p);
  detail::launch(c.rt, f, {1}, {1}, 0, c.stream(), a);
  c.rt.stream_sync(c.stream());
  std::uint64_t result = 0;
  c.rt.copy_to_host(&result, static_cast<std::uint64_t*>(c.gpu->result.p), sizeof(result));
  if (result == 0 && initiator) {
    std::vector<std::uint64_t> t(a.rounds);
    c.rt.copy_to_host(t.data(), static_cast<std::uint64_t*>(c.gpu->times.p),
                      t.size() * sizeof(std::uint64_t));
    for (auto x : t) ns.push_back(static_cast<double>(x));
  }
  return result;
}

// Measures one (src, dst, addressing) on the ranks involved; on src, fills row.
void measure(Ctx& c, std::pair<int, int> pair, int lsa, MatrixRow& row) {
  const auto [src, dst] = pair;  // (-1, -1): this team has no pair left, only the barriers
  const int me = c.boot.rank();
  c.boot.barrier_fast("matrix.bandwidth");
  if (me == src) {
    row.write = write_bandwidth(c, dst, lsa, c.write);
    row.read_gbps = Measured::of(read_bandwidth(c, dst, lsa));
    for (const auto& v : c.variants) row.variants.push_back(write_bandwidth(c, dst, lsa, v));
  }
  c.boot.barrier_fast("matrix.pingpong");
  const std::uint32_t first = c.next_round;
  c.next_round += static_cast<std::uint32_t>(c.o.rounds);
  if (me != src && me != dst) return;
  std::vector<double> ns;
  const int peer = me == src ? dst : src;
  const auto timed_out = c.gpu ? gpu_pingpong(c, peer, lsa, me == src, first, ns)
                               : host_pingpong(c, peer, lsa, me == src, first, ns);
  if (me != src) return;
  row.timed_out = timed_out != 0;
  if (timed_out) {
    char why[128];
    std::snprintf(why, sizeof(why), "the ping-pong timed out at round %llu of %d (bound %g s)",
                  static_cast<unsigned long long>(timed_out), c.o.rounds, c.boot.timeout_s());
    row.latency_us_p50 = Measured::none(why);
  } else {
    row.latency_us_p50 =
        ns.empty() ? Measured::none("no round trip was timed") : Measured::of(median(ns) / 2 / 1000);
  }
}

// What this rank's device offers the write kernels.
detail::WriteTarget write_target(Runtime& rt, int device) {
  detail::WriteTarget t;
  t.host = rt.platform() == Platform::host ? 1 : 0;
  t.bulk_copy = !t.host && arch_has_bulk_copy(target_arch(rt, device)) ? 1 : 0;
  t.multiprocessors = std::max(rt.device_info(device).multiprocessors, 1);
  return t;
}

}  // namespace

std::vector<std::pair<int, int>> matrix_pairs(const Bootstrap& boot, int sample) {
  std::vector<std::pair<int, int>> all;
  for (int s : boot.team())
    for (int d : boot.team())
      if (s != d) all.emplace_back(s, d);
  if (sample > 0 && static_cast<std::size_t>(sample) < all.size()) {
    std::mt19937 rng(20261130u);  // fixed: every rank draws the same sample
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<std::size_t>(sample));
    std::sort(all.begin(), all.end());
  }
  return all;
}

PeerMatrix peer_matrix(Bootstrap& boot, Runtime& rt, int device, HandleType ht, const MatrixOptions& o) {
  if (o.bytes < 16 || o.bytes % 16 || o.iterations < 1 || o.rounds < 1)
    throw UsageError("matrix: bytes must be a positive multiple of 16, iterations and rounds >= 1");
  validate_write_kernel(o.write);
  // Each team measures its own pairs; every rank runs as many steps as the largest team needs.
  const auto pairs = matrix_pairs(boot, o.pairs);
  const auto counts = boot.allgather_value("matrix.pair-count", static_cast<std::uint64_t>(pairs.size()));
  const auto devices = boot.allgather_value("matrix.devices", static_cast<std::int32_t>(device));
  const std::size_t most = *std::max_element(counts.begin(), counts.end());
  WindowOptions wo;
  wo.bytes = o.bytes;
  wo.signal_bytes = 4096;
  wo.handle_type = ht;
  wo.device = device;
  Window w(rt, wo);
  w.rendezvous(boot);
  std::vector<MatrixRow> mine;
  std::size_t variants = 0;
  {
    Ctx c(boot, rt, w, o);
    const auto target = write_target(rt, device);
    c.write = detail::write_choice(o.write, target);
    c.variants = detail::write_variants(o.write, target);
    variants = c.variants.size();
    detail::fill_pattern(rt, c.scratch.p, o.bytes, boot.rank());
    if (rt.platform() != Platform::host) c.gpu = std::make_unique<Gpu>(rt, device, o.rounds);
    for (std::size_t p = 0; p < most; ++p)
      for (int lsa = 0; lsa < 2; ++lsa) {
        const bool src = p < pairs.size() && pairs[p].first == boot.rank();
        MatrixRow row;
        if (src) {
          row.src = pairs[p].first;
          row.dst = pairs[p].second;
          row.lsa = lsa != 0;
          row.write.kernel = c.write;
          row.write.gbps = row.write.copy_engine_gbps = row.read_gbps = row.latency_us_p50 =
              Measured::none(kNotMeasured);
        }
        measure(c, p < pairs.size() ? pairs[p] : std::make_pair(-1, -1), lsa, row);
        if (src) mine.push_back(std::move(row));
      }
  }  // the buffers, events, stream and kernels go before the window
  w.teardown();
  PeerMatrix m;
  m.bytes = o.bytes;
  m.iterations = o.iterations;
  m.rounds = o.rounds;
  m.request = o.write;
  m.rows = detail::gather_rows(boot, mine, variants);
  for (auto& r : m.rows) {
    std::string why;
    const Json link = link_gbps(rt, devices[static_cast<std::size_t>(r.src)],
                                devices[static_cast<std::size_t>(r.dst)], &why);
    r.link_gbps = link.is_number() ? Measured::of(link.get<double>()) : Measured::none(why);
  }
  return m;
}

}  // namespace mori::symm
