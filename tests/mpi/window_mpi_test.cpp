// SPDX-License-Identifier: MIT
// Multi-rank window test, run under mpirun by CTest on the host runtime (and by hand on a GPU).
//
// Every rank writes a (writer rank, target rank, offset) pattern into every peer's slot: once through the
// pointer array, once through LSA addressing (base + p * stride), and checks every byte it received. With
// --cycles N it repeats alloc -> rendezvous -> teardown and checks that the fd count and the runtime's live
// resources end where they started. --size-by-rank gives each rank a different size (the mismatch test).
#include <cstring>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/tool/tool.hpp"
#include "mori/symm/window/window.hpp"

using namespace mori::symm;

namespace {

struct Options {
  std::string handle_type = "posix_fd";
  std::size_t bytes = 256 * 1024;
  int cycles = 1;
  bool size_by_rank = false;
  std::size_t stride_quantum = 0;
  int expect_team_size = 0;
  bool check_every_cycle = false;
  bool doctor = false;
};

std::uint32_t pattern(int writer, int target, std::size_t word, int model) {
  return static_cast<std::uint32_t>((writer + 1) * 0x01000193u) ^
         static_cast<std::uint32_t>((target + 7) << 20) ^ static_cast<std::uint32_t>(word * 2654435761u) ^
         static_cast<std::uint32_t>(model << 30);
}

// Each rank's slot is split into world segments; writer w owns segment w of every target.
long exchange(ToolEnv& env, Window& w, int model) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  const int me = boot.rank(), world = boot.world();
  const std::size_t seg_words = w.layout().buffer_bytes / 4 / static_cast<std::size_t>(world);
  std::vector<std::uint32_t> buf(seg_words);
  const auto lsa = w.lsa();
  for (int t = 0; t < world; ++t) {
    void* dst = nullptr;
    if (model == 0) {
      dst = w.peer_ptrs()[static_cast<std::size_t>(t)];
    } else if (boot.team_rank_of(t) >= 0) {
      dst =
          static_cast<std::uint8_t*>(lsa.base) + static_cast<std::size_t>(boot.team_rank_of(t)) * lsa.stride;
    }
    const bool same_team = boot.team_rank_of(t) >= 0;
    if ((dst != nullptr) != same_team)
      throw CheckFailed("rank " + std::to_string(t) + ": pointer is " + (dst ? "set" : "null") +
                        " but the rank is " + (same_team ? "" : "not ") + "in this team");
    if (!dst) continue;
    for (std::size_t i = 0; i < seg_words; ++i) buf[i] = pattern(me, t, i, model);
    rt.copy_to_device(static_cast<std::uint8_t*>(dst) + static_cast<std::size_t>(me) * seg_words * 4,
                      buf.data(), seg_words * 4);
  }
  rt.device_sync();
  boot.barrier("test.written");
  long wrong = 0;
  std::vector<std::uint32_t> got(seg_words * static_cast<std::size_t>(world));
  rt.copy_to_host(got.data(), w.local(), got.size() * 4);
  for (int src = 0; src < world; ++src) {
    if (boot.team_rank_of(src) < 0) continue;
    for (std::size_t i = 0; i < seg_words; ++i)
      if (got[static_cast<std::size_t>(src) * seg_words + i] != pattern(src, me, i, model)) ++wrong;
  }
  boot.barrier("test.checked");
  return wrong;
}

int run(ToolEnv& env, const Options& o) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  WindowOptions wo;
  wo.bytes = o.size_by_rank ? o.bytes * static_cast<std::size_t>(boot.rank() % 2 + 1) : o.bytes;
  wo.signal_bytes = 4096;
  wo.stride_quantum = o.stride_quantum;
  wo.handle_type = parse_handle_type(o.handle_type);
  wo.device = env.device;
  if (o.expect_team_size && boot.team_size() != o.expect_team_size)
    throw CheckFailed("team size " + std::to_string(boot.team_size()) + ", expected " +
                      std::to_string(o.expect_team_size));
  // The cheap checks, as a tool runs them before its first window: a failing rendezvous then names the cause.
  if (o.doctor) cheap_diagnoses(boot, &rt, env.device, 1);
  int fds0 = -1;
  LiveResources live0{};
  long wrong = 0;
  for (int c = 0; c < o.cycles; ++c) {
    if (c == 1) {  // after the first cycle: lazily created state (logger, MPI buffers) exists by now
      fds0 = count_open_fds();
      live0 = rt.live_resources();
    }
    Window w(rt, wo);
    w.rendezvous(boot);
    if (c == 0 || c == o.cycles - 1 || o.check_every_cycle) {
      wrong += exchange(env, w, 0);
      wrong += exchange(env, w, 1);
    }
    w.teardown();
    if (!w.torn_down()) throw CheckFailed("window not fully torn down");
  }
  if (o.cycles > 1) {
    const int fds1 = count_open_fds();
    const auto live1 = rt.live_resources();
    if (fds1 != fds0 || live1.handles != live0.handles || live1.mappings != live0.mappings ||
        live1.reservations != live0.reservations)
      throw CheckFailed("resources grew over " + std::to_string(o.cycles) + " cycles: fds " +
                        std::to_string(fds0) + " -> " + std::to_string(fds1) + ", handles " +
                        std::to_string(live0.handles) + " -> " + std::to_string(live1.handles) +
                        ", mappings " + std::to_string(live0.mappings) + " -> " +
                        std::to_string(live1.mappings));
    std::printf("rank %d: %d cycles, fds %d -> %d, mappings %lld -> %lld\n", boot.rank(), o.cycles, fds0,
                fds1, static_cast<long long>(live0.mappings), static_cast<long long>(live1.mappings));
  }
  std::printf("rank %d: team %d/%d, wrong %ld\n", boot.rank(), boot.team_rank(), boot.team_size(), wrong);
  return wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "window-mpi-test";
  spec.description = "Multi-rank symmetric window test";
  spec.declare = [&](CLI::App& app) {
    app.add_option("--handle-type", o.handle_type);
    app.add_option("--bytes", o.bytes);
    app.add_option("--cycles", o.cycles);
    app.add_flag("--size-by-rank", o.size_by_rank);
    app.add_option("--stride-quantum", o.stride_quantum);
    app.add_option("--expect-team-size", o.expect_team_size);
    app.add_flag("--check-every-cycle", o.check_every_cycle);
    app.add_flag("--doctor", o.doctor);
  };
  spec.body = [&](ToolEnv& env) { return run(env, o); };
  return tool_main(argc, argv, spec);
}
