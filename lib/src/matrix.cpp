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
#include <thread>

#include "mori/symm/bootstrap.hpp"
#include "mori/symm/detail/fault.hpp"
#include "mori/symm/detail/kernel_abi.hpp"
#include "mori/symm/detail/matrix_write.hpp"
#include "mori/symm/detail/poll.hpp"
#include "mori/symm/environment.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/window.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;
using detail::WriteChoice;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A row's values; then, with --write-kernel all, kPerVariant per variant: (write, copy engine, verified).
enum Value { kSrc, kDst, kWrite, kCopyEngine, kVerified, kRead, kLatency, kTimeout, kValues };
constexpr std::size_t kPerVariant = 3;

struct Ctx {
  Ctx(Bootstrap& b, Runtime& r, Window& win, const MatrixOptions& opt) : boot(b), rt(r), w(win), o(opt) {}
  Bootstrap& boot;
  Runtime& rt;
  Window& w;
  const MatrixOptions& o;
  bool gpu = false;
  void* scratch = nullptr;  // a plain local buffer of o.bytes holding the pattern: the source of every write
  void* sink = nullptr;     // another: the destination of the reads and the poison of every write check
  std::unique_ptr<Jit> jit;
  std::unique_ptr<KernelModule> mod;
  Stream stream = nullptr;
  Event e0 = nullptr, e1 = nullptr;
  std::uint64_t* dev_times = nullptr;
  std::uint64_t* dev_result = nullptr;
  std::uint32_t next_round = 1;
  WriteChoice write;                  // this rank's write kernel
  std::vector<WriteChoice> variants;  // --write-kernel all
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
      c.rt.event_record(c.e0, c.stream);
      runs[k]();
      c.rt.event_record(c.e1, c.stream);
      c.rt.event_sync(c.e1);
      if (i) ms[k].push_back(c.rt.event_elapsed_ms(c.e0, c.e1));
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
    std::memcpy(read ? c.sink : remote, read ? remote : c.scratch, c.o.bytes);
    if (i) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return static_cast<double>(c.o.bytes) / (median(ms) * 1e6);
}

// Read bandwidth: the load/store kernel copies peer's slot into the local sink buffer.
double read_bandwidth(Ctx& c, int peer, int lsa) {
  if (!c.gpu) return host_gbps(c, peer, lsa, 1);
  // The read direction: 4 loads in flight, plain stores.
  Function f = c.mod->function(detail::matrix_copy_name(lsa != 0, 4, false));
  detail::MatrixCopyArgs a;
  a.peers = c.w.peer_ptrs_device();
  a.lsa_base = static_cast<char*>(c.w.lsa().base);
  a.stride = c.w.lsa().stride;
  a.n16 = c.o.bytes / 16;
  a.idx = lsa ? c.boot.team_rank_of(peer) : peer;
  a.read = 1;
  a.local = c.sink;
  auto args = a.args();
  const unsigned blocks = static_cast<unsigned>(c.rt.device_info(c.w.options().device).multiprocessors) * 4;
  return gpu_gbps(c, {[&] { c.rt.launch(f, {blocks}, {512}, 0, c.stream, args.data()); }})[0];
}

// Whether one `write` puts exactly the pattern into peer's slot: the slot is poisoned first (by the copy
// engine on the GPU), then written once and read back.
bool write_once_and_check(Ctx& c, int peer, const std::function<void()>& write) {
  char* remote = peer_base(c, peer, 0);
  c.rt.memset_async(c.sink, 0xff, c.o.bytes, c.stream);
  c.rt.copy_async(remote, c.sink, c.o.bytes, c.stream);
  write();
  c.rt.stream_sync(c.stream);
  return detail::holds_pattern(c.rt, remote, c.o.bytes, c.boot.rank());
}

// Write kernel w into peer's slot: out[0] its GB/s, out[1] on the GPU the copy engine's write of the same
// bytes to the same slot (the baseline the kernel is judged against), timed interleaved with it, out[2] 1
// when one write checked out (write_once_and_check), else 0.
void write_bandwidth(Ctx& c, int peer, int lsa, const WriteChoice& w, double* out) {
  if (!c.gpu) {
    char* remote = peer_base(c, peer, lsa);
    // Test-only: a write that leaves its last 16 bytes out, which the check must catch.
    const std::size_t n = c.o.bytes - (detail::fault_armed("matrix.short-write", c.boot.rank()) ? 16 : 0);
    out[2] = write_once_and_check(c, peer, [&] { std::memcpy(remote, c.scratch, n); }) ? 1 : 0;
    out[0] = host_gbps(c, peer, lsa, 0);
    return;
  }
  detail::WriteArgs a;
  a.peers = const_cast<void**>(c.w.peer_ptrs_device());
  a.lsa_base = static_cast<char*>(c.w.lsa().base);
  a.stride = c.w.lsa().stride;
  a.idx = lsa ? c.boot.team_rank_of(peer) : peer;
  a.lsa = lsa;
  a.local = c.scratch;
  a.bytes = c.o.bytes;
  const auto kernel = [&] { detail::launch_write(c.rt, *c.mod, w, a, c.stream); };
  out[2] = write_once_and_check(c, peer, kernel) ? 1 : 0;
  char* remote = peer_base(c, peer, 0);
  const auto g = gpu_gbps(c, {[&] { c.rt.copy_async(remote, c.scratch, c.o.bytes, c.stream); }, kernel});
  out[1] = g[0];
  out[0] = g[1];
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
  Function f = c.mod->function(detail::matrix_pingpong_name(lsa != 0));
  detail::MatrixPingpongArgs a;
  a.peers = c.w.peer_ptrs_device();
  a.lsa_base = static_cast<char*>(c.w.lsa().base);
  a.stride = c.w.lsa().stride;
  a.signal_offset = c.w.layout().signal_offset;
  a.timeout_ns = static_cast<std::uint64_t>(c.boot.timeout_s() * 1e9);
  a.idx = lsa ? c.boot.team_rank_of(peer) : peer;
  a.initiator = initiator ? 1 : 0;
  a.my_pad = c.w.signal_pad(c.boot.rank());
  a.first_round = first;
  a.rounds = static_cast<std::uint32_t>(c.o.rounds);
  a.times = c.dev_times;
  a.result = c.dev_result;
  auto args = a.args();
  c.rt.launch(f, {1}, {1}, 0, c.stream, args.data());
  c.rt.stream_sync(c.stream);
  std::uint64_t result = 0;
  c.rt.copy_to_host(&result, c.dev_result, sizeof(result));
  if (result == 0 && initiator) {
    std::vector<std::uint64_t> t(a.rounds);
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
    write_bandwidth(c, dst, lsa, c.write, &v[kWrite]);
    v[kRead] = read_bandwidth(c, dst, lsa);
    for (std::size_t k = 0; k < c.variants.size(); ++k)
      write_bandwidth(c, dst, lsa, c.variants[k], &v[kValues + kPerVariant * k]);
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
  for (const auto& spec : kernel_catalog(c.jit->arch()))
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
  if (c.sink) c.rt.device_free(c.sink);
}

Json ratio_or_null(double a, double b) {
  return std::isnan(a) || std::isnan(b) || b <= 0 ? Json(nullptr) : Json(a / b);
}

// Every rank's values, gathered: per rank `per_rank` doubles, `stride` per row.
struct Gathered {
  const std::vector<double>& all;
  std::size_t per_rank, stride;
  const std::vector<std::int32_t>& devices;
  const std::vector<detail::WriteTarget>& targets;  // of each rank, for the write kernels it ran
};

// --write-kernel all: each variant's record with its write, copy engine, their ratio and its check. Counts
// the writes that did not check out into *wrong.
Json variants_json(const std::vector<WriteChoice>& variants, const double* v, std::size_t* wrong) {
  Json out = Json::array();
  for (std::size_t k = 0; k < variants.size(); ++k) {
    Json j = detail::to_json(variants[k]);
    const double* x = v + kValues + kPerVariant * k;
    j["write_gbps"] = number_or_null(x[0]);
    j["copy_engine_write_gbps"] = number_or_null(x[1]);
    j["write_over_copy_engine"] = ratio_or_null(x[0], x[1]);
    j["verified"] = x[2] == 1;
    *wrong += x[2] == 1 ? 0 : 1;
    out.push_back(j);
  }
  return out;
}

// Matrix rows from every rank's values, each row from its source rank's copy. *wrong: writes that did not
// check out.
Json rows_json(Runtime& rt, const Gathered& g, const WriteKernelOptions& wo, bool* timed_out,
               std::size_t* wrong) {
  Json rows = Json::array();
  *timed_out = false;
  for (std::size_t i = 0; i < g.all.size(); i += g.stride) {
    const double* v = g.all.data() + i;
    const int src = static_cast<int>(v[kSrc]), dst = static_cast<int>(v[kDst]);
    // Only the source's copy of a row carries its values.
    if (std::isnan(v[kSrc]) || static_cast<std::size_t>(src) != i / g.per_rank) continue;
    const auto s = static_cast<std::size_t>(src);
    std::string why;
    Json link = link_gbps(rt, g.devices[s], g.devices[static_cast<std::size_t>(dst)], &why);
    Json row = {{"src", src},
                {"dst", dst},
                {"addressing", (i / g.stride) % 2 ? "lsa" : "ptr"},
                {"write_gbps", number_or_null(v[kWrite])},
                {"write_kernel", detail::to_json(detail::write_choice(wo, g.targets[s]))},
                {"write_verified", v[kVerified] == 1},
                {"read_gbps", number_or_null(v[kRead])},
                {"copy_engine_write_gbps", number_or_null(v[kCopyEngine])},
                {"write_over_copy_engine", ratio_or_null(v[kWrite], v[kCopyEngine])},
                {"latency_us_p50", number_or_null(v[kLatency])},
                {"link_gbps", link}};
    if (link.is_null()) row["link_reason"] = why;
    *wrong += v[kVerified] == 1 ? 0 : 1;
    if (wo.kernel == WriteKernel::all)
      row["write_variants"] = variants_json(detail::write_variants(wo, g.targets[s]), v, wrong);
    if (v[kTimeout] == 1) row["status"] = "timeout";
    *timed_out = *timed_out || v[kTimeout] == 1;
    rows.push_back(row);
  }
  return rows;
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

Json peer_matrix(Bootstrap& boot, Runtime& rt, int device, HandleType ht, const MatrixOptions& o,
                 bool* timed_out) {
  if (o.bytes < 16 || o.bytes % 16 || o.iterations < 1 || o.rounds < 1)
    throw UsageError("matrix: bytes must be a positive multiple of 16, iterations and rounds >= 1");
  validate_write_kernel(o.write);
  // Each team measures its own pairs; every rank runs as many steps as the largest team needs.
  const auto pairs = matrix_pairs(boot, o.pairs);
  const auto counts = boot.allgather_value("matrix.pair-count", static_cast<std::uint64_t>(pairs.size()));
  const auto devices = boot.allgather_value("matrix.devices", static_cast<std::int32_t>(device));
  const auto target = write_target(rt, device);
  const auto targets = boot.allgather_value("matrix.write-targets", target);
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
  c.write = detail::write_choice(o.write, target);
  c.variants = detail::write_variants(o.write, target);
  const std::size_t stride = kValues + kPerVariant * c.variants.size();
  std::vector<double> mine(most * 2 * stride, kNaN);
  try {
    c.scratch = rt.device_alloc(o.bytes);
    c.sink = rt.device_alloc(o.bytes);
    detail::fill_pattern(rt, c.scratch, o.bytes, boot.rank());
    if (c.gpu) setup_gpu(c, device);
    for (std::size_t p = 0; p < most; ++p)
      for (int lsa = 0; lsa < 2; ++lsa) {
        double* v = mine.data() + (p * 2 + static_cast<std::size_t>(lsa)) * stride;
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
  std::size_t wrong = 0;
  Json rows = rows_json(rt, {all, mine.size(), stride, devices, targets}, o.write, timed_out, &wrong);
  return {{"bytes", o.bytes},      {"iterations", o.iterations},
          {"rounds", o.rounds},    {"write_kernel", detail::request_json(o.write)},
          {"writes_wrong", wrong}, {"rows", rows}};
}

}  // namespace mori::symm
