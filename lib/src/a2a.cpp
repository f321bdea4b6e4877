#include "mori/symm/a2a.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "mori/symm/detail/fault.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/log.hpp"
#include "mori/symm/probe.hpp"
#include "mori/symm/window.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kThreads = 512;
constexpr std::size_t kMaxChunk = std::size_t{1} << 34;  // 16 GiB per pair: far beyond any device today

// Same function as mori_pattern in kernels/prelude.hip.
std::uint32_t pattern(std::uint32_t src, std::uint32_t dst, std::uint64_t word) {
  std::uint64_t x = (static_cast<std::uint64_t>(src) << 48) ^ (static_cast<std::uint64_t>(dst) << 32) ^ word;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x) & 0x7fffffffu;
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Signal pad as the kernels see it (kernels/a2a.hip, MoriSignalPad).
constexpr std::size_t kPadFlagsOffset = 32 * 4;
std::size_t signal_pad_bytes(int world) {
  return kPadFlagsOffset + 4 * static_cast<std::size_t>(world);
}

}  // namespace

const char* to_string(Addressing a) noexcept {
  return a == Addressing::lsa ? "lsa" : "ptr";
}
const char* to_string(SyncMode s) noexcept {
  return s == SyncMode::device ? "device" : "host";
}

TimeStats time_stats(std::vector<double> us) {
  TimeStats t;
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  auto pct = [&](double q) {
    const double pos = q * static_cast<double>(us.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, us.size() - 1);
    return us[lo] + (us[hi] - us[lo]) * (pos - static_cast<double>(lo));
  };
  t.min = us.front();
  t.max = us.back();
  t.p50 = pct(0.5);
  t.p95 = pct(0.95);
  double sum = 0;
  for (double v : us) sum += v;
  t.mean = sum / static_cast<double>(us.size());
  return t;
}

std::size_t parse_size(const std::string& option, const std::string& text) {
  const std::string accepted = " (accepted: a positive integer of bytes, or with K, M, G: 256K, 64M, 1G)";
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw UsageError(option + ": '" + text + "' is not a size" + accepted);
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw UsageError(option + ": '" + text + "' is not a size" + accepted);
  }
  std::string suffix = text.substr(pos);
  unsigned shift = 0;
  if (suffix == "" || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    shift = 30;
  else
    throw UsageError(option + ": '" + text + "' has an unknown unit" + accepted);
  if (v > (std::numeric_limits<unsigned long long>::max() >> shift))
    throw UsageError(option + ": '" + text + "' overflows");
  return static_cast<std::size_t>(v << shift);
}

void validate_a2a(const A2aConfig& c, int world, std::uint64_t device_memory, bool host_runtime) {
  if (c.chunks.empty()) throw UsageError("--chunk-kib / -b -e -f: no chunk size given");
  for (auto ch : c.chunks) {
    if (ch == 0) throw UsageError("chunk size: must be > 0 bytes");
    if (ch % 16 != 0)
      throw UsageError("chunk size: " + std::to_string(ch) +
                       " bytes is not a multiple of 16 (16-byte vector accesses)");
    if (ch > kMaxChunk) throw UsageError("chunk size: " + std::to_string(ch) + " bytes exceeds 16 GiB");
    if (ch > std::numeric_limits<std::size_t>::max() / 4 / static_cast<std::size_t>(world))
      throw UsageError("chunk size: world x chunk overflows");
    // Source, window and the ceiling's scratch buffer, each world x chunk.
    const long double need = 3.0L * static_cast<long double>(world) * static_cast<long double>(ch);
    if (device_memory && need > 0.9L * static_cast<long double>(device_memory))
      throw UsageError("chunk size: " + std::to_string(ch) + " bytes needs " +
                       std::to_string(static_cast<unsigned long long>(need / (1 << 20))) +
                       " MiB per rank (3 x world x chunk), more than 90% of the device's " +
                       std::to_string(device_memory >> 20) + " MiB");
  }
  if (c.addressing.empty()) throw UsageError("--addressing: nothing selected");
  if (c.syncs.empty()) throw UsageError("--sync: nothing selected");
  if (c.graph < 0 || c.graph > 10000) throw UsageError("--graph: must be in 0..10000");
  if (c.graph > 0 && std::find(c.syncs.begin(), c.syncs.end(), SyncMode::device) == c.syncs.end())
    throw UsageError("--graph: needs --sync device or both (the graph captures push + device barrier)");
  if (c.graph > 0 && host_runtime)
    throw UsageError("--graph: needs the GPU runtime (the host runtime has no graphs)");
  if (c.blocks_per_peer < 0 || c.blocks_per_peer > 65535)
    throw UsageError("--blocks-per-peer: must be in 0..65535");
  if (c.iters < 1 || c.iters > 1000000) throw UsageError("--iters: must be in 1..1000000");
  if (c.warmup < 0 || c.warmup > 100000) throw UsageError("--warmup: must be in 0..100000");
  if (world > 1024) throw UsageError("world size: at most 1024 ranks");
  if (c.unroll != 0 && c.unroll != 4 && c.unroll != 8) throw UsageError("--unroll: must be 0 (auto), 4 or 8");
}

int auto_unroll(std::size_t chunk_bytes) {
  return chunk_bytes >= (std::size_t{16} << 20) ? 8 : 4;
}

int auto_blocks_per_peer(int multiprocessors, int world, std::size_t chunk_bytes, int threads) {
  // Each thread should move at least 8 vectors (128 bytes): thinner blocks spend their time being scheduled
  // (measured on the H200 at 8 ranks, 256 KiB: 4 blocks per peer 23.6 us, 32 blocks 31.8 us). And no more
  // blocks than about four per multiprocessor across all peers.
  const std::size_t vecs = chunk_bytes / 16;
  const std::size_t per_block = static_cast<std::size_t>(threads) * 8;
  const std::size_t useful = (vecs + per_block - 1) / per_block;
  const std::size_t target =
      (4 * static_cast<std::size_t>(std::max(multiprocessors, 1)) + static_cast<std::size_t>(world) - 1) /
      static_cast<std::size_t>(world);
  return static_cast<int>(std::clamp<std::size_t>(std::min(useful, target), 1, 65535));
}

struct A2aBench::Impl {
  ToolEnv& env;
  A2aConfig cfg;
  Runtime& rt;
  Bootstrap& boot;
  bool gpu;
  int me, world;
  int sms = 1;
  std::size_t max_chunk = 0;
  HandleType ht = HandleType::posix_fd;
  std::unique_ptr<Window> win;
  void* src = nullptr;
  void* scratch = nullptr;
  std::uint64_t* wrong_dev = nullptr;
  std::unique_ptr<Jit> jit;
  std::unique_ptr<KernelModule> mod;
  Stream stream = nullptr;
  std::vector<Event> events;
  bool all_one_device = true;
  bool shared_without_mps = false;
  std::uint64_t timeout_ns;
  double last_ceiling_plain = 0, last_ceiling_graph = 0;  // GB/s, of the last ceiling() call

  Impl(ToolEnv& e, const A2aConfig& c)
      : env(e), cfg(c), rt(*e.rt), boot(*e.boot), gpu(e.rt->platform() != Platform::host) {
    me = boot.rank();
    world = boot.world();
    timeout_ns = static_cast<std::uint64_t>(boot.timeout_s() * 1e9);
    if (boot.team_size() != world)
      throw UsageError("mori-a2a: every rank must be in one load/store team (this job spans " +
                       std::to_string(boot.num_nodes()) + " nodes)");
    max_chunk = *std::max_element(cfg.chunks.begin(), cfg.chunks.end());
    auto info = rt.device_info(env.device);
    sms = info.multiprocessors;
    // Which ranks share a device, and whether MPS serves them.
    struct Where {
      std::uint64_t host;
      std::int32_t device;
    };
    char hn[256] = {};
    gethostname(hn, sizeof(hn) - 1);
    auto all = boot.allgather_value("a2a.devices", Where{std::hash<std::string>{}(hn), env.device});
    int sharing = 0;
    for (auto& w : all) {
      if (w.host != all[0].host || w.device != all[0].device) all_one_device = false;
      if (w.host == all[static_cast<std::size_t>(me)].host && w.device == env.device) ++sharing;
    }
    if (gpu && sharing > 1 && !mps_active()) {
      shared_without_mps = true;
      if (me == 0)
        spdlog::warn(
            "{} ranks share one GPU and no MPS daemon is active: their contexts time-slice, and the "
            "numbers measure context switching (about +250 us per iteration per extra rank on an H200); "
            "start one with scripts/mps start",
            sharing);
    }
    // The ranks of one device (or of the host, for the host runtime) share its memory.
    if (!gpu) sharing = boot.team_size();
    validate_a2a(cfg, world, info.memory_bytes / static_cast<std::uint64_t>(std::max(sharing, 1)), !gpu);

    ht = cfg.handle_type == "auto" ? choose_handle_type(rt, env.device) : parse_handle_type(cfg.handle_type);
    if (gpu) {
      jit = std::make_unique<Jit>(target_arch(rt, env.device), to_string(rt.platform()));
      // The all-to-all uses the catalog's first entry; MORI_PRECOMPILE=1 builds the rest up front too.
      const auto catalog = kernel_catalog();
      const auto compiled = jit->get(catalog[0]);
      if (jit->precompile_requested())
        for (std::size_t i = 1; i < catalog.size(); ++i) jit->get(catalog[i]);
      mod = std::make_unique<KernelModule>(rt, compiled);
      stream = rt.stream_create();
    }
    WindowOptions wo;
    wo.bytes = static_cast<std::size_t>(world) * max_chunk;
    wo.signal_bytes = signal_pad_bytes(world);
    wo.stride_quantum = cfg.stride_quantum;
    wo.handle_type = ht;
    wo.device = env.device;
    win = std::make_unique<Window>(rt, wo);
    win->rendezvous(boot);
    src = rt.device_alloc(wo.bytes);
    scratch = rt.device_alloc(wo.bytes);
    if (gpu) wrong_dev = static_cast<std::uint64_t*>(rt.device_alloc(sizeof(std::uint64_t)));
  }

  ~Impl() {
    for (auto e : events) rt.event_destroy(e);
    if (wrong_dev) rt.device_free(wrong_dev);
    if (scratch) rt.device_free(scratch);
    if (src) rt.device_free(src);
    if (win) {
      try {
        win->teardown();
      } catch (const std::exception& e) {
        spdlog::error("a2a: window teardown failed: {}", e.what());
      }
    }
    mod.reset();
    if (stream) rt.stream_destroy(stream);
  }

  char* peer_base(int p) const { return static_cast<char*>(win->peer_ptrs()[static_cast<std::size_t>(p)]); }

  // Source layout at one chunk size: chunk p at src + p * chunk, word i = pattern(me, p, i). Re-filled per
  // size.
  void fill_source_for(std::size_t chunk) {
    const std::size_t words = chunk / 4;
    if (gpu) {
      Function f = mod->function("a2a_fill");
      void* s = src;
      int w = world, m = me;
      std::uint64_t ch = chunk;
      void* args[] = {&s, &w, &m, &ch};
      rt.launch(f, {static_cast<unsigned>(sms) * 4}, {256}, 0, stream, args);
      rt.stream_sync(stream);
    } else {
      auto* s = static_cast<std::uint32_t*>(src);
      for (int p = 0; p < world; ++p)
        for (std::size_t i = 0; i < words; ++i)
          s[static_cast<std::size_t>(p) * words + i] =
              pattern(static_cast<std::uint32_t>(me), static_cast<std::uint32_t>(p), i);
    }
  }

  // --- one iteration ---------------------------------------------------------------------------------------
  void push(Addressing a, bool fused, std::size_t chunk, int bpp) {
    const int unroll = cfg.unroll ? cfg.unroll : auto_unroll(chunk);
    if (gpu) {
      const std::string name = std::string("a2a_push<") + (a == Addressing::lsa ? "1" : "0") + ", " +
                               (fused ? "1" : "0") + ", " + std::to_string(unroll) + ">";
      Function f = mod->function(name);
      const void* s = src;
      void* const* peers = win->peer_ptrs_device();
      auto lsa = win->lsa();
      char* base = static_cast<char*>(lsa.base);
      std::uint64_t stride = lsa.stride, ch = chunk, sig = win->layout().signal_offset, tmo = timeout_ns;
      int w = world, m = me, b = bpp;
      void* args[] = {&s, &peers, &base, &stride, &w, &m, &ch, &b, &sig, &tmo};
      rt.launch(f, {static_cast<unsigned>(world * bpp)}, {kThreads}, 0, stream, args);
      return;
    }
    const auto lsa = win->lsa();
    for (int k = 0; k < world; ++k) {
      const int p = (me + k) % world;
      char* base = a == Addressing::lsa
                       ? static_cast<char*>(lsa.base) + static_cast<std::size_t>(p) * lsa.stride
                       : peer_base(p);
      std::memcpy(base + static_cast<std::size_t>(me) * chunk,
                  static_cast<const char*>(src) + static_cast<std::size_t>(p) * chunk, chunk);
    }
    if (fused) host_device_barrier();
  }

  // The device barrier's protocol on the host runtime: the same epoch flags in the same signal pad.
  void host_device_barrier() {
    auto pad_of = [&](int r) {
      return reinterpret_cast<std::uint32_t*>(peer_base(r) + win->layout().signal_offset);
    };
    std::uint32_t* mine = pad_of(me);
    const std::uint32_t epoch = std::atomic_ref<std::uint32_t>(mine[1]).load() + 1;
    std::atomic_ref<std::uint32_t>(mine[1]).store(epoch);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int q = 0; q < world; ++q)
      std::atomic_ref<std::uint32_t>(pad_of(q)[kPadFlagsOffset / 4 + static_cast<std::size_t>(me)])
          .store(epoch, std::memory_order_release);
    const auto t0 = Clock::now();
    int spins = 0;
    for (int q = 0; q < world; ++q) {
      auto flag = std::atomic_ref<std::uint32_t>(mine[kPadFlagsOffset / 4 + static_cast<std::size_t>(q)]);
      while (static_cast<std::int32_t>(flag.load(std::memory_order_acquire) - epoch) < 0) {
        if (++spins > 256) std::this_thread::yield();
        if (std::chrono::duration<double>(Clock::now() - t0).count() > boot.timeout_s()) {
          std::string missing;
          for (int r = 0; r < world; ++r)
            if (static_cast<std::int32_t>(
                    std::atomic_ref<std::uint32_t>(mine[kPadFlagsOffset / 4 + static_cast<std::size_t>(r)])
                        .load() -
                    epoch) < 0)
              missing += (missing.empty() ? "" : ",") + std::to_string(r);
          throw TimeoutError("a2a device barrier (host runtime) timed out after " +
                             std::to_string(boot.timeout_s()) + " s on " + rank_tag() + " (epoch " +
                             std::to_string(epoch) + "); ranks not arrived: " + missing);
        }
      }
    }
  }

  void sync_stream() {
    if (gpu) rt.stream_sync(stream);
  }

  std::uint64_t verify(std::size_t chunk) {
    const std::size_t words = chunk / 4;
    if (detail::fault_armed("a2a.corrupt", me)) {
      // One element, on purpose: the word 0 of the chunk that rank (me + 1) % world sent.
      const std::size_t idx = static_cast<std::size_t>((me + 1) % world) * words;
      std::uint32_t bad =
          pattern(static_cast<std::uint32_t>((me + 1) % world), static_cast<std::uint32_t>(me), 0) ^ 1u;
      rt.copy_to_device(static_cast<std::uint32_t*>(win->local()) + idx, &bad, 4);
    }
    if (gpu) {
      rt.memset_async(wrong_dev, 0, sizeof(std::uint64_t), stream);
      Function f = mod->function("a2a_verify");
      const void* w = win->local();
      int wd = world, m = me;
      std::uint64_t ch = chunk;
      std::uint64_t* out = wrong_dev;
      void* args[] = {&w, &wd, &m, &ch, &out};
      rt.launch(f, {static_cast<unsigned>(sms) * 4}, {256}, 0, stream, args);
      rt.stream_sync(stream);
      std::uint64_t wrong = 0;
      rt.copy_to_host(&wrong, wrong_dev, sizeof(wrong));
      return wrong;
    }
    const auto* w = static_cast<const std::uint32_t*>(win->local());
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < words * static_cast<std::size_t>(world); ++i)
      wrong +=
          w[i] != pattern(static_cast<std::uint32_t>(i / words), static_cast<std::uint32_t>(me), i % words);
    return wrong;
  }

  std::vector<double> max_over_ranks(const std::vector<double>& mine, const std::string& step) {
    std::vector<double> all(mine.size() * static_cast<std::size_t>(world));
    boot.allgather(step, mine.data(), all.data(), mine.size() * sizeof(double));
    std::vector<double> out(mine.size(), 0);
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < mine.size(); ++i)
        out[i] = std::max(out[i], all[static_cast<std::size_t>(r) * mine.size() + i]);
    return out;
  }

  std::uint64_t sum_over_ranks(std::uint64_t v, const std::string& step) {
    auto all = boot.allgather_value(step, v);
    std::uint64_t s = 0;
    for (auto x : all) s += x;
    return s;
  }

  void ensure_events(std::size_t n) {
    while (events.size() < n) events.push_back(rt.event_create());
  }

  // Times n back-to-back launches of `one` on the stream with an event between each; per-launch microseconds.
  std::vector<double> time_back_to_back(int n, const std::function<void()>& one) {
    ensure_events(static_cast<std::size_t>(n) + 1);
    for (int i = 0; i < n; ++i) {
      rt.event_record(events[static_cast<std::size_t>(i)], stream);
      one();
    }
    rt.event_record(events[static_cast<std::size_t>(n)], stream);
    rt.event_sync(events[static_cast<std::size_t>(n)]);
    std::vector<double> us(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      us[static_cast<std::size_t>(i)] = 1000.0 * rt.event_elapsed_ms(events[static_cast<std::size_t>(i)],
                                                                     events[static_cast<std::size_t>(i) + 1]);
    return us;
  }

  // The platform's copy of the same bytes, all ranks at once.
  std::pair<double, std::string> ceiling(std::size_t chunk) {
    const std::size_t bytes = static_cast<std::size_t>(world) * chunk;
    std::function<void()> copy;
    std::string kind;
    if (!gpu) {
      kind = "host_memcpy";
      copy = [&] { std::memcpy(scratch, src, bytes); };
    } else if (all_one_device) {
      kind = "local_d2d_copy";
      copy = [&] { rt.copy_async(scratch, src, bytes, stream); };
    } else {
      kind = "peer_copy";
      copy = [&] {
        for (int k = 0; k < world; ++k) {
          const int p = (me + k) % world;
          rt.copy_async(peer_base(p) + static_cast<std::size_t>(me) * chunk,
                        static_cast<const char*>(src) + static_cast<std::size_t>(p) * chunk, chunk, stream);
        }
      };
    }
    for (int i = 0; i < std::max(cfg.warmup, 1); ++i) copy();
    sync_stream();
    std::vector<double> us, graph_us;
    boot.barrier_fast("a2a.ceiling.start");
    if (gpu) {
      // Plain copies, back to back, and the same copies captured in a graph: launch gaps make small plain
      // copies look slow, while graph memcpy nodes may take another engine. The ceiling is the better of the
      // two.
      us = time_back_to_back(cfg.iters, copy);
      constexpr int kCopies = 16;
      rt.capture_begin(stream);
      for (int k = 0; k < kCopies; ++k) copy();
      GraphExec g = rt.capture_end(stream);
      try {
        rt.graph_launch(g, stream);
        sync_stream();
        boot.barrier_fast("a2a.ceiling.graph");
        graph_us =
            time_back_to_back(std::max(5, cfg.iters / kCopies + 1), [&] { rt.graph_launch(g, stream); });
        for (auto& v : graph_us) v /= kCopies;
      } catch (...) {
        rt.graph_destroy(g);
        throw;
      }
      rt.graph_destroy(g);
    } else {
      for (int i = 0; i < cfg.iters; ++i) {
        boot.barrier_fast("a2a.ceiling");
        const auto t0 = Clock::now();
        copy();
        us.push_back(us_since(t0));
      }
    }
    boot.barrier_fast("a2a.ceiling.end");
    const double total = static_cast<double>(world) * static_cast<double>(bytes);
    last_ceiling_plain = total / (time_stats(max_over_ranks(us, "a2a.ceiling.times")).p50 * 1e3);
    last_ceiling_graph = graph_us.empty()
                             ? 0.0
                             : total / (time_stats(max_over_ranks(graph_us, "a2a.ceiling.gtimes")).p50 * 1e3);
    return {std::max(last_ceiling_plain, last_ceiling_graph), kind};
  }

  A2aResult run_one(std::size_t chunk, Addressing a, SyncMode s, int graph_k, double ceiling_bw,
                    const std::string& ceiling_kind) {
    A2aResult r;
    r.chunk_bytes = chunk;
    r.addressing = a;
    r.sync = s;
    r.graph = graph_k > 0;
    r.graph_iters = graph_k;
    r.blocks_per_peer =
        gpu ? (cfg.blocks_per_peer ? cfg.blocks_per_peer : auto_blocks_per_peer(sms, world, chunk, kThreads))
            : 1;
    r.unroll = gpu ? (cfg.unroll ? cfg.unroll : auto_unroll(chunk)) : 0;
    const bool fused = s == SyncMode::device;
    const int bpp = r.blocks_per_peer;
    const std::string tag = std::string("a2a.") + to_string(a) + "." + to_string(s);

    // Checked iteration: poison every destination, push once, synchronise, check every element.
    rt.memset_async(win->local(), 0xFF, static_cast<std::size_t>(world) * chunk, stream);
    sync_stream();
    boot.barrier(tag + ".poisoned");
    push(a, fused, chunk, bpp);
    sync_stream();
    if (!fused) boot.barrier_fast(tag + ".pushed");
    r.wrong = sum_over_ranks(verify(chunk), tag + ".wrong");
    boot.barrier(tag + ".verified");

    // Timed iterations.
    std::vector<double> us, kernel_us;
    if (graph_k > 0) {
      rt.capture_begin(stream);
      for (int k = 0; k < graph_k; ++k) push(a, true, chunk, bpp);
      GraphExec g = rt.capture_end(stream);
      try {
        const int replays = std::max(5, (cfg.iters + graph_k - 1) / graph_k);
        for (int i = 0; i < std::max(cfg.warmup, 1); ++i) rt.graph_launch(g, stream);
        sync_stream();
        boot.barrier_fast(tag + ".graph.start");
        us = time_back_to_back(replays, [&] { rt.graph_launch(g, stream); });
        for (auto& v : us) v /= graph_k;
        r.iters = replays * graph_k;
      } catch (...) {
        rt.graph_destroy(g);
        throw;
      }
      rt.graph_destroy(g);
    } else if (fused && gpu) {
      for (int i = 0; i < cfg.warmup; ++i) push(a, true, chunk, bpp);
      sync_stream();
      boot.barrier_fast(tag + ".start");
      detail::fault_point("a2a.timed", me);
      us = time_back_to_back(cfg.iters, [&] { push(a, true, chunk, bpp); });
      r.iters = cfg.iters;
    } else {
      // Host sync (and the host runtime's device sync): wall time from one synchronisation point to the next.
      ensure_events(2);
      for (int i = 0; i < cfg.warmup + cfg.iters; ++i) {
        if (i == cfg.warmup) detail::fault_point("a2a.timed", me);
        const auto t0 = Clock::now();
        if (gpu) rt.event_record(events[0], stream);
        push(a, fused, chunk, bpp);
        if (gpu) rt.event_record(events[1], stream);
        sync_stream();
        if (!fused) boot.barrier_fast(tag + ".iter");
        if (i >= cfg.warmup) {
          us.push_back(us_since(t0));
          if (gpu) kernel_us.push_back(1000.0 * rt.event_elapsed_ms(events[0], events[1]));
        }
      }
      r.iters = cfg.iters;
    }
    sync_stream();
    boot.barrier_fast(tag + ".end");
    r.time_us = time_stats(max_over_ranks(us, tag + ".times"));
    if (!kernel_us.empty()) r.kernel_us_p50 = time_stats(max_over_ranks(kernel_us, tag + ".ktimes")).p50;
    const double t = r.time_us.p50 * 1e-6;
    const double w = world, c = static_cast<double>(chunk);
    r.agg_bw_gbps = w * (w - 1) * c / t / 1e9;
    r.total_bw_gbps = w * w * c / t / 1e9;
    r.algbw_gbps = w * c / t / 1e9;
    r.busbw_gbps = r.algbw_gbps * (w - 1) / w;
    r.ceiling_bw_gbps = ceiling_bw;
    r.ceiling_plain_gbps = last_ceiling_plain;
    r.ceiling_graph_gbps = last_ceiling_graph;
    r.ceiling_kind = ceiling_kind;
    return r;
  }
};

A2aBench::A2aBench(ToolEnv& env, const A2aConfig& cfg) : impl_(new Impl(env, cfg)) {}
A2aBench::~A2aBench() {
  delete impl_;
}

std::string A2aBench::handle_type() const {
  return to_string(impl_->ht);
}
Json A2aBench::jit_json() const {
  auto& m = *impl_;
  if (!m.jit) return Json(nullptr);
  struct RankJit {
    double cold_ms, load_ms;
    std::int32_t compiled, cached;
  };
  RankJit mine{0, 0, 0, 0};
  for (const auto& e : m.jit->stats()) {
    if (e.source == "cache") {
      mine.load_ms += e.ms;
      ++mine.cached;
    } else {
      mine.cold_ms += e.ms;
      ++mine.compiled;
    }
  }
  auto all = m.boot.allgather_value("a2a.jit", mine);
  Json j = m.jit->stats_json();
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
  return {{"shared_device_without_mps", impl_->shared_without_mps},
          {"all_ranks_one_device", impl_->all_one_device},
          {"window",
           {{"alloc_bytes", impl_->win->layout().alloc_bytes},
            {"stride", impl_->win->layout().stride},
            {"signal_offset", impl_->win->layout().signal_offset}}}};
}

std::vector<A2aResult> A2aBench::run(const std::function<void(const std::string&)>& progress) {
  auto& m = *impl_;
  std::vector<A2aResult> out;
  for (std::size_t chunk : m.cfg.chunks) {
    m.fill_source_for(chunk);
    auto [ceil_bw, kind] = m.ceiling(chunk);
    for (SyncMode s : m.cfg.syncs)
      for (Addressing a : m.cfg.addressing) out.push_back(m.run_one(chunk, a, s, 0, ceil_bw, kind));
    if (m.cfg.graph > 0)
      for (Addressing a : m.cfg.addressing)
        out.push_back(m.run_one(chunk, a, SyncMode::device, m.cfg.graph, ceil_bw, kind));
    if (m.me == 0 && progress) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "chunk %zu KiB done: ceiling %.1f GB/s (%s)", chunk >> 10, ceil_bw,
                    kind.c_str());
      progress(buf);
    }
  }
  return out;
}

Json to_json(const A2aResult& r) {
  Json j;
  j["chunk_bytes"] = r.chunk_bytes;
  j["addressing"] = to_string(r.addressing);
  j["sync"] = to_string(r.sync);
  j["graph"] = r.graph;
  j["graph_iters"] = r.graph_iters;
  j["blocks_per_peer"] = r.blocks_per_peer;
  j["unroll"] = r.unroll;
  j["iters"] = r.iters;
  j["time_us"] = {{"min", r.time_us.min},
                  {"p50", r.time_us.p50},
                  {"p95", r.time_us.p95},
                  {"max", r.time_us.max},
                  {"mean", r.time_us.mean}};
  if (r.kernel_us_p50 > 0) j["kernel_us_p50"] = r.kernel_us_p50;
  j["agg_bw_gbps"] = r.agg_bw_gbps;
  j["total_bw_gbps"] = r.total_bw_gbps;
  j["algbw_gbps"] = r.algbw_gbps;
  j["busbw_gbps"] = r.busbw_gbps;
  j["ceiling_bw_gbps"] = r.ceiling_bw_gbps;
  j["ceiling_kind"] = r.ceiling_kind;
  j["ceiling_plain_gbps"] = r.ceiling_plain_gbps;
  if (r.ceiling_graph_gbps > 0) j["ceiling_graph_gbps"] = r.ceiling_graph_gbps;
  j["ceiling_ratio"] = r.ceiling_bw_gbps > 0 ? r.total_bw_gbps / r.ceiling_bw_gbps : 0.0;
  j["wrong"] = r.wrong;
  return j;
}

}  // namespace mori::symm
