#include "mori/symm/matrix.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>

#include "mori/symm/bootstrap.hpp"
#include "mori/symm/detail/fault.hpp"
#include "mori/symm/detail/poll.hpp"
#include "mori/symm/environment.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/window.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
enum Value { kSrc, kDst, kWrite, kRead, kCopyEngine, kLatency, kTimeout, kValues };

struct Ctx {
  Ctx(Bootstrap& b, Runtime& r, Window& win, const MatrixOptions& opt) : boot(b), rt(r), w(win), o(opt) {}
  Bootstrap& boot;
  Runtime& rt;
  Window& w;
  const MatrixOptions& o;
  bool gpu = false;
  void* scratch = nullptr;  // a plain local buffer of o.bytes: the other end of every copy
  std::unique_ptr<Jit> jit;
  std::unique_ptr<KernelModule> mod;
  Stream stream = nullptr;
  Event e0 = nullptr, e1 = nullptr;
  std::uint64_t* dev_times = nullptr;
  std::uint64_t* dev_result = nullptr;
  std::uint32_t next_round = 1;
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

std::string kernel(const char* name, int lsa) {
  return std::string(name) + "<" + std::to_string(lsa) + ">";
}

// GB/s of o.bytes per run: the median of o.iterations runs of `run` on the stream, after one warm-up.
double gpu_gbps(Ctx& c, const std::function<void()>& run) {
  std::vector<double> ms;
  for (int i = 0; i <= c.o.iterations; ++i) {
    c.rt.event_record(c.e0, c.stream);
    run();
    c.rt.event_record(c.e1, c.stream);
    c.rt.event_sync(c.e1);
    if (i) ms.push_back(c.rt.event_elapsed_ms(c.e0, c.e1));
  }
  return static_cast<double>(c.o.bytes) / (median(ms) * 1e6);
}

// GB/s of copies of o.bytes between the local scratch buffer and peer's slot, by the load/store kernel.
double bandwidth(Ctx& c, int peer, int lsa, int read) {
  if (c.gpu) {
    Function f = c.mod->function(kernel("matrix_copy", lsa));
    void* peers = const_cast<void**>(c.w.peer_ptrs_device());
    char* base = static_cast<char*>(c.w.lsa().base);
    std::uint64_t stride = c.w.lsa().stride, n16 = c.o.bytes / 16;
    int idx = lsa ? c.boot.team_rank_of(peer) : peer;
    void* local = c.scratch;
    void* args[] = {&peers, &base, &stride, &idx, &read, &local, &n16};
    const unsigned blocks = static_cast<unsigned>(c.rt.device_info(c.w.options().device).multiprocessors) * 4;
    return gpu_gbps(c, [&] { c.rt.launch(f, {blocks}, {512}, 0, c.stream, args); });
  }
  std::vector<double> ms;
  char* remote = peer_base(c, peer, lsa);
  for (int i = 0; i <= c.o.iterations; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(read ? c.scratch : remote, read ? remote : c.scratch, c.o.bytes);
    if (i) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return static_cast<double>(c.o.bytes) / (median(ms) * 1e6);
}

// The copy engine's write of the same bytes to the same peer slot: the baseline for the kernel's write.
double copy_engine_write(Ctx& c, int peer) {
  char* remote = peer_base(c, peer, 0);
  return gpu_gbps(c, [&] { c.rt.copy_async(remote, c.scratch, c.o.bytes, c.stream); });
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
  Function f = c.mod->function(kernel("matrix_pingpong", lsa));
  void* peers = const_cast<void**>(c.w.peer_ptrs_device());
  char* base = static_cast<char*>(c.w.lsa().base);
  std::uint64_t stride = c.w.lsa().stride, sig = c.w.layout().signal_offset;
  std::uint64_t tmo = static_cast<std::uint64_t>(c.boot.timeout_s() * 1e9);
  int idx = lsa ? c.boot.team_rank_of(peer) : peer, init = initiator ? 1 : 0;
  void* my_pad = c.w.signal_pad(c.boot.rank());
  std::uint32_t rounds = static_cast<std::uint32_t>(c.o.rounds);
  void* args[] = {&peers, &base,  &stride, &idx, &sig,         &my_pad,
                  &init,  &first, &rounds, &tmo, &c.dev_times, &c.dev_result};
  c.rt.launch(f, {1}, {1}, 0, c.stream, args);
  c.rt.stream_sync(c.stream);
  std::uint64_t result = 0;
  c.rt.copy_to_host(&result, c.dev_result, sizeof(result));
  if (result == 0 && initiator) {
    std::vector<std::uint64_t> t(rounds);
    c.rt.copy_to_host(t.data(), c.dev_times, t.size() * sizeof(std::uint64_t));
    for (auto x : t) ns.push_back(static_cast<double>(x));
  }
  return result;
}

// Measures one (src, dst, addressing) on the ranks involved; writes src's values into v.
void measure(Ctx& c, std::pair<int, int> pair, int lsa, double* v) {
  const auto [src, dst] = pair;  // (-1, -1): this team has no pair left, only the barriers
  const int me = c.boot.rank();
  c.boot.barrier_fast("matrix.bandwidth");
  if (me == src) {
    v[kWrite] = bandwidth(c, dst, lsa, 0);
    v[kRead] = bandwidth(c, dst, lsa, 1);
    if (c.gpu && lsa == 0) v[kCopyEngine] = copy_engine_write(c, dst);
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
  v[kTimeout] = timed_out ? 1 : 0;
  v[kLatency] = timed_out || ns.empty() ? kNaN : median(ns) / 2 / 1000;
}

Json number_or_null(double x) {
  return std::isnan(x) ? Json(nullptr) : Json(x);
}

void setup_gpu(Ctx& c, int device) {
  c.jit = std::make_unique<Jit>(target_arch(c.rt, device), to_string(c.rt.platform()));
  for (const auto& spec : kernel_catalog())
    if (spec.file == "matrix.hip") c.mod = std::make_unique<KernelModule>(c.rt, c.jit->get(spec));
  if (!c.mod) throw ApiError("kernel_catalog", __FILE__, __LINE__, "KERNEL_NOT_FOUND", "no matrix.hip entry");
  c.stream = c.rt.stream_create();
  c.e0 = c.rt.event_create();
  c.e1 = c.rt.event_create();
  c.dev_times = static_cast<std::uint64_t*>(c.rt.device_alloc(static_cast<std::size_t>(c.o.rounds) * 8));
  c.dev_result = static_cast<std::uint64_t*>(c.rt.device_alloc(8));
}

void release(Ctx& c) noexcept {
  if (c.dev_times) c.rt.device_free(c.dev_times);
  if (c.dev_result) c.rt.device_free(c.dev_result);
  if (c.e0) c.rt.event_destroy(c.e0);
  if (c.e1) c.rt.event_destroy(c.e1);
  if (c.stream) c.rt.stream_destroy(c.stream);
  if (c.scratch) c.rt.device_free(c.scratch);
}

// Matrix rows from every rank's values (per rank: `per_rank` doubles), each row from its source rank's copy.
Json rows_json(Runtime& rt, const std::vector<double>& all, std::size_t per_rank,
               const std::vector<std::int32_t>& devices, bool* timed_out) {
  Json rows = Json::array();
  *timed_out = false;
  for (std::size_t i = 0; i < all.size(); i += kValues) {
    const double* v = all.data() + i;
    const int src = static_cast<int>(v[kSrc]), dst = static_cast<int>(v[kDst]);
    // Only the source's copy of a row carries its values.
    if (std::isnan(v[kSrc]) || static_cast<std::size_t>(src) != i / per_rank) continue;
    std::string why;
    Json link =
        link_gbps(rt, devices[static_cast<std::size_t>(src)], devices[static_cast<std::size_t>(dst)], &why);
    Json row = {{"src", src},
                {"dst", dst},
                {"addressing", (i / kValues) % 2 ? "lsa" : "ptr"},
                {"write_gbps", number_or_null(v[kWrite])},
                {"read_gbps", number_or_null(v[kRead])},
                {"copy_engine_write_gbps", number_or_null(v[kCopyEngine])},
                {"latency_us_p50", number_or_null(v[kLatency])},
                {"link_gbps", link}};
    if (link.is_null()) row["link_reason"] = why;
    if (v[kTimeout] == 1) row["status"] = "timeout";
    *timed_out = *timed_out || v[kTimeout] == 1;
    rows.push_back(row);
  }
  return rows;
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

Json peer_matrix(Bootstrap& boot, Runtime& rt, int device, HandleType ht, const MatrixOptions& o,
                 bool* timed_out) {
  if (o.bytes < 16 || o.bytes % 16 || o.iterations < 1 || o.rounds < 1)
    throw UsageError("matrix: bytes must be a positive multiple of 16, iterations and rounds >= 1");
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
  Ctx c(boot, rt, w, o);
  c.gpu = rt.platform() != Platform::host;
  std::vector<double> mine(most * 2 * kValues, kNaN);
  try {
    c.scratch = rt.device_alloc(o.bytes);
    rt.memset_async(c.scratch, 0x5a, o.bytes, nullptr);
    rt.device_sync();
    if (c.gpu) setup_gpu(c, device);
    for (std::size_t p = 0; p < most; ++p)
      for (int lsa = 0; lsa < 2; ++lsa) {
        double* v = mine.data() + (p * 2 + static_cast<std::size_t>(lsa)) * kValues;
        if (p < pairs.size()) {
          v[kSrc] = pairs[p].first;
          v[kDst] = pairs[p].second;
        }
        measure(c, p < pairs.size() ? pairs[p] : std::make_pair(-1, -1), lsa, v);
      }
  } catch (...) {
    release(c);
    throw;
  }
  release(c);
  w.teardown();
  std::vector<double> all(mine.size() * static_cast<std::size_t>(boot.world()));
  boot.allgather("matrix.rows", mine.data(), all.data(), mine.size() * sizeof(double));
  Json rows = rows_json(rt, all, mine.size(), devices, timed_out);
  return {{"bytes", o.bytes}, {"iterations", o.iterations}, {"rounds", o.rounds}, {"rows", rows}};
}

}  // namespace mori::symm
