// SPDX-License-Identifier: MIT
// The all-to-all on the host runtime: the algorithm of kernels/a2a.hip (same layout, same signal pad, same
// epoch parity, same pattern and mutations), run by the calling thread over POSIX shared memory. It sits next
// to the kernels it mirrors so that a change to one is seen beside the other. Compiled into libmori_symm.
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/base/detail/poll.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/window/window.hpp"

namespace mori::symm::detail {
namespace {

using Clock = std::chrono::steady_clock;

// MoriSignalPad (kernels/abi.hip): arrive, epoch, 30 words of padding, then one flag per rank.
constexpr std::size_t kPadEpochWord = MORI_SIGNAL_PAD_EPOCH_WORD;
constexpr std::size_t kPadFlagsWord = MORI_SIGNAL_PAD_FLAGS_WORD;

// mori_pattern in kernels/prelude.hip.
std::uint32_t pattern(std::uint32_t src, std::uint32_t dst, std::uint64_t word, std::uint32_t tag) {
  std::uint64_t x = (static_cast<std::uint64_t>(src) << 48) ^ (static_cast<std::uint64_t>(dst) << 32) ^ word;
  x ^= static_cast<std::uint64_t>(tag) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x) & 0x7fffffffu;
}

class HostEngine final : public A2aEngine {
 public:
  explicit HostEngine(const EngineContext& c) : c_(c), src_(c.src_bytes) {}

  void poison(std::size_t bytes) override { std::memset(c_.win.local(), 0xFF, bytes); }

  void fill(const A2aLayout& L) override {
    const std::uint32_t tag = epoch_word(c_.me).load(std::memory_order_acquire) + 1;
    const std::uint64_t words = (L.chunk + 3) / 4;
    for (int p = 0; p < c_.world; ++p) {
      auto* s = reinterpret_cast<std::uint32_t*>(src_.data() + static_cast<std::size_t>(p) * L.pitch);
      for (std::uint64_t w = 0; w < words; ++w)
        s[w] = pattern(static_cast<std::uint32_t>(c_.me), static_cast<std::uint32_t>(p), w, tag);
    }
  }

  // simple, direct, and copy (the host's copies are memcpy either way, so copy runs as simple).
  void push(const A2aLayout& L, const PushSpec& sp) override {
    if (sp.sync && sp.protocol == Protocol::ll) return push_ll(L, sp);
    const std::uint32_t parity = epoch_word(c_.me).load(std::memory_order_acquire) & 1u;
    const bool direct = sp.sync && sp.protocol == Protocol::direct;
    for (int k = 0; k < c_.world; ++k) {
      const int p = (c_.me + k) % c_.world;  // start with self, then the next ranks, as the kernel does
      char* d = base(p, sp.addressing) + parity * L.region + static_cast<std::size_t>(c_.me) * L.pitch;
      store_chunk(d, src_.data() + static_cast<std::size_t>(p) * L.pitch, L.chunk, sp.mutate);
      // Direct protocol: this "block" (one per peer here) signals its destination at once.
      if (direct)
        word(p, kPadFlagsWord + static_cast<std::size_t>(c_.world + c_.me))
            .fetch_add(1, std::memory_order_release);
    }
    slow(sp);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const std::uint32_t epoch = epoch_word(c_.me).load() + 1;
    epoch_word(c_.me).store(epoch, std::memory_order_release);
    if (direct) {
      wait_counters(sp);
    } else if (sp.sync) {
      signal_and_wait(epoch, sp);
    }
  }

  void delay(double us) override {
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
  }

  void verify(const A2aLayout& L) override {
    const std::uint32_t epoch = epoch_word(c_.me).load(std::memory_order_acquire);
    const auto* buf = reinterpret_cast<const std::uint8_t*>(c_.win.local()) + ((epoch - 1u) & 1u) * L.region;
    for (int s = 0; s < c_.world; ++s) {
      const std::uint8_t* slot = buf + static_cast<std::size_t>(s) * L.pitch;
      for (std::uint64_t w = 0; w < L.pitch / 4; ++w) {
        const std::uint32_t want =
            pattern(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(c_.me), w, epoch);
        bool bad = false;
        for (std::uint64_t b = 0; b < 4; ++b) {
          const std::uint8_t expect = w * 4 + b < L.chunk ? static_cast<std::uint8_t>(want >> (8 * b)) : 0xFF;
          bad |= slot[w * 4 + b] != expect;
        }
        wrong_ += bad;
      }
    }
  }

  void copy_peers(const A2aLayout& L) override {
    for (int k = 0; k < c_.world; ++k) {
      const int p = (c_.me + k) % c_.world;
      std::memcpy(base(p, Addressing::ptr) + static_cast<std::size_t>(c_.me) * L.pitch,
                  src_.data() + static_cast<std::size_t>(p) * L.pitch, L.chunk);
    }
  }

  void sync() override {}
  std::uint64_t take_wrong() override { return std::exchange(wrong_, 0); }

  std::vector<double> time_each(int n, const std::function<void()>& fn) override {
    std::vector<double> us;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      fn();
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    return us;
  }
  std::unique_ptr<CapturedGraph> capture(const std::function<void()>&) override { return nullptr; }
  std::string copy_kind() const override { return "host_memcpy"; }
  const char* push_launch() const override { return "plain"; }
  double default_skew_us() const override { return 3000; }
  const Jit* jit() const override { return nullptr; }
  // Ranks are processes on the CPU: nothing is resident or not, and nothing launches overlapped here.
  long resident_blocks(const PushSpec&) override { return std::numeric_limits<long>::max(); }

 private:
  char* base(int p, Addressing a) const {
    if (a == Addressing::lsa) {
      const auto lsa = c_.win.lsa();
      return static_cast<char*>(lsa.base) + static_cast<std::size_t>(p) * lsa.stride;
    }
    return static_cast<char*>(c_.win.peer_ptrs()[static_cast<std::size_t>(p)]);
  }
  std::uint32_t* pad(int p) const {
    return reinterpret_cast<std::uint32_t*>(base(p, Addressing::ptr) + c_.win.layout().signal_offset);
  }
  std::atomic_ref<std::uint32_t> word(int p, std::size_t w) const {
    return std::atomic_ref<std::uint32_t>(pad(p)[w]);
  }
  std::atomic_ref<std::uint32_t> epoch_word(int p) const { return word(p, kPadEpochWord); }
  std::atomic_ref<std::uint32_t> flag(int owner, int from) const {
    return word(owner, kPadFlagsWord + static_cast<std::size_t>(from));
  }

  // Bounded spin until behind(q) is false for every q; names the ranks still behind on expiry.
  void wait_all(const std::function<bool(int)>& behind, const std::string& what) {
    const auto deadline = detail::deadline_after(c_.timeout_s);
    for (int q = 0; q < c_.world; ++q) {
      if (detail::poll_until([&] { return !behind(q); }, deadline, detail::Backoff::spin_then_yield(256)))
        continue;
      std::vector<int> missing;
      for (int r = 0; r < c_.world; ++r)
        if (behind(r)) missing.push_back(r);
      throw TimeoutError("a2a device barrier (host runtime): " + rank_tag() + " waited more than " +
                         std::to_string(c_.timeout_s) + " s (" + what + "); ranks not arrived: " +
                         (c_.name_ranks ? c_.name_ranks(missing) : detail::join_ranks(missing)));
    }
  }

  // The ll protocol (a2a_ll): own chunk copied directly; to every peer each 32-bit word as one 64-bit word
  // (flag << 32 | data) in its staging slot of this parity; from every peer, once every word carries this
  // launch's flag, the data into the receive buffer. Then the epoch advances.
  void push_ll(const A2aLayout& L, const PushSpec& sp) {
    const std::uint32_t epoch = epoch_word(c_.me).load(std::memory_order_acquire);
    const std::uint32_t parity = epoch & 1u, flag = epoch + 1;
    const std::uint64_t words = (L.chunk + 3) / 4, sent = words ? (words + 3) / 4 * 4 : 4;
    const std::uint64_t staging = L.ll_offset + parity * static_cast<std::uint64_t>(c_.world) * L.ll_pitch;
    char* recv = base(c_.me, Addressing::ptr) + parity * L.region;
    const auto me = static_cast<std::size_t>(c_.me);
    store_chunk(recv + me * L.pitch, src_.data() + me * L.pitch, L.chunk, sp.mutate);
    for (int k = 1; k < c_.world; ++k) {
      const int p = (c_.me + k) % c_.world;
      auto* out = reinterpret_cast<std::uint64_t*>(base(p, sp.addressing) + staging + me * L.ll_pitch);
      const auto* s =
          reinterpret_cast<const std::uint32_t*>(src_.data() + static_cast<std::size_t>(p) * L.pitch);
      for (std::uint64_t w = 0; w < sent; ++w)
        std::atomic_ref<std::uint64_t>(out[w]).store(
            static_cast<std::uint64_t>(flag) << 32 | (w < words ? s[w] : 0), std::memory_order_relaxed);
    }
    const char* stage = base(c_.me, Addressing::ptr) + staging;
    auto slot = [&](int q) {
      return reinterpret_cast<std::uint64_t*>(const_cast<char*>(stage) +
                                              static_cast<std::size_t>(q) * L.ll_pitch);
    };
    if (!(sp.mutate & kMutateNoWait)) {
      std::vector<std::uint64_t> seen(static_cast<std::size_t>(c_.world),
                                      0);  // words known to carry the flag
      wait_all(
          [&](int q) {
            auto& n = seen[static_cast<std::size_t>(q)];
            while (q != c_.me && n < sent &&
                   static_cast<std::int32_t>(
                       static_cast<std::uint32_t>(
                           std::atomic_ref<std::uint64_t>(slot(q)[n]).load(std::memory_order_relaxed) >> 32) -
                       flag) >= 0)  // this launch's flag or a later one (kernels/a2a.hip, mori_ll_reached)
              ++n;
            return q != c_.me && n < sent;
          },
          "ll flags of epoch " + std::to_string(flag));
    }
    std::vector<std::uint32_t> data(static_cast<std::size_t>(words));  // one source's words, unpacked
    for (int k = 1; k < c_.world; ++k) {
      const int q = (c_.me + c_.world - k) % c_.world;
      for (std::uint64_t w = 0; w < words; ++w)
        data[w] = static_cast<std::uint32_t>(
            std::atomic_ref<std::uint64_t>(slot(q)[w]).load(std::memory_order_relaxed));
      store_chunk(recv + static_cast<std::size_t>(q) * L.pitch, reinterpret_cast<const char*>(data.data()),
                  L.chunk, sp.mutate);
    }
    slow(sp);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    epoch_word(c_.me).store(epoch + 1, std::memory_order_release);
  }

  // Test-only (MORI_FAULT a2a.slow-kernel): the push waits before its final signal, as each block of the
  // kernel does.
  static void slow(const PushSpec& sp) {
    if (sp.slow_ns) std::this_thread::sleep_for(std::chrono::nanoseconds(sp.slow_ns));
  }

  // One chunk into a receive slot, with the stale (no stores) and overrun (16 bytes past) mutations.
  static void store_chunk(char* d, const char* s, std::uint64_t chunk, std::uint32_t mutate) {
    if (chunk && !(mutate & kMutateStale)) std::memcpy(d, s, chunk);  // s may be null when chunk is 0
    if (mutate & kMutateOverrun) std::memset(d + (chunk + 15) / 16 * 16, 0x5A, 16);
  }

  // The direct protocol's wait: every source's counter grew by one since the last launch (base kept locally).
  void wait_counters(const PushSpec& sp) {
    const auto w = static_cast<std::size_t>(c_.world);
    std::vector<std::uint32_t> want(w);
    for (std::size_t q = 0; q < w; ++q) {
      want[q] = word(c_.me, kPadFlagsWord + 2 * w + q).load() + 1;
      word(c_.me, kPadFlagsWord + 2 * w + q).store(want[q]);
    }
    if (sp.mutate & kMutateNoWait) return;
    wait_all(
        [&](int q) {
          const auto qi = static_cast<std::size_t>(q);
          return static_cast<std::int32_t>(
                     word(c_.me, kPadFlagsWord + w + qi).load(std::memory_order_acquire) - want[qi]) < 0;
        },
        "direct counters");
  }

  // The simple protocol's barrier: signal every peer with this epoch, then wait (bounded) for all of them.
  void signal_and_wait(std::uint32_t epoch, const PushSpec& sp) {
    for (int q = 0; q < c_.world; ++q) flag(q, c_.me).store(epoch, std::memory_order_release);
    if (sp.mutate & kMutateNoWait) return;
    wait_all(
        [&](int q) {
          return static_cast<std::int32_t>(flag(c_.me, q).load(std::memory_order_acquire) - epoch) < 0;
        },
        "epoch " + std::to_string(epoch));
  }

  EngineContext c_;
  std::vector<char> src_;
  std::uint64_t wrong_ = 0;
};

}  // namespace

std::unique_ptr<A2aEngine> make_host_a2a_engine(const EngineContext& ctx) {
  return std::make_unique<HostEngine>(ctx);
}

}  // namespace mori::symm::detail
