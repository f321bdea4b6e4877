// SPDX-License-Identifier: MIT
// The all-to-all driver, the same for every backend (docs/mori-a2a.md): per chunk size, the ceiling; per
// configuration, a verification over back-to-back epochs with rank skew, then timing, then the push alone and
// the synchronisation alone in the same launch mode. The facts the plan needs are gathered by setup.cpp, each
// row runs in row_run.cpp, and every test-only hook is in test_hooks.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "mori/symm/a2a/a2a.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/window/window.hpp"
#include "references.hpp"
#include "row_run.hpp"
#include "setup.hpp"
#include "test_hooks.hpp"
#include "timer.hpp"

namespace mori::symm {

using detail::A2aLayout;
using detail::Launch;
using detail::PushSpec;

namespace {

// Signal pad as the kernels see it (kernels/abi.hip, MoriSignalPad): flags, counters, bases.
std::size_t signal_pad_bytes(int world) {
  return static_cast<std::size_t>(MORI_SIGNAL_PAD_BYTES(world));
}

}  // namespace

struct A2aBench::Impl {
  Runtime& rt;
  Bootstrap& boot;
  int device;
  A2aConfig cfg;
  int me, world;
  DeviceInfo info;
  detail::A2aTestHooks hooks;
  detail::A2aSetup setup;  // the facts the plan depends on (setup.facts.placement: where the ranks sit)
  HandleType ht = HandleType::posix_fd;
  std::unique_ptr<Window> win;
  std::unique_ptr<detail::A2aEngine> eng;
  std::unique_ptr<detail::A2aRowRunner> rows;

  Impl(Runtime& r, Bootstrap& b, int dev, const A2aConfig& c)
      : rt(r),
        boot(b),
        device(dev),
        cfg(c),
        me(b.rank()),
        world(b.world()),
        info(r.device_info(dev)),
        hooks(world_rank_noexcept()) {  // MORI_FAULT names the job's ranks, also within a team
    const bool host = rt.platform() == Platform::host;
    if (boot.team_size() != world)
      throw UsageError("the all-to-all: every rank must be in one load/store team (this job spans " +
                       std::to_string(boot.num_nodes()) + " nodes)");
    setup = detail::gather_a2a_setup(rt, boot, device, info, cfg, hooks,
                                     [this](const PushSpec& s) { return eng->resident_blocks(s); });
    const detail::DevicePlacement& placement = setup.facts.placement;
    // The ranks of one device (or of the host, for the host runtime) share its memory.
    const int sharing = host ? boot.team_size() : placement.max_ranks_per_device;
    validate_a2a(cfg, world, info.memory_bytes / static_cast<std::uint64_t>(std::max(sharing, 1)), host);
    ht = resolve_handle_type(rt, device, cfg.handle_type);
    // The doctor's cheap checks; a failing rendezvous below logs what they found.
    const auto found = cheap_diagnoses(boot, &rt, device, 1);
    if (me == 0 && has_error(found)) spdlog::error("doctor: likely causes:\n{}", format_diagnoses(found));
    const std::uint64_t max_pitch = a2a_pitch(*std::max_element(cfg.chunks.begin(), cfg.chunks.end()));
    WindowOptions wo;
    const std::uint64_t ll_offset = 2 * static_cast<std::uint64_t>(world) * max_pitch;  // two receive buffers
    wo.bytes = ll_offset + detail::a2a_ll_staging_bytes(cfg, placement, world);
    wo.signal_bytes = signal_pad_bytes(world);
    wo.stride_quantum = cfg.stride_quantum;
    wo.handle_type = ht;
    wo.device = device;
    win = std::make_unique<Window>(rt, wo);
    win->rendezvous(boot);
    eng = detail::make_a2a_engine(
        {rt, *win, me, world, device, boot.timeout_s(), static_cast<std::size_t>(world) * max_pitch,
         [b = &boot](const std::vector<int>& ranks) { return b->name_ranks(ranks); }});
    rows = std::make_unique<detail::A2aRowRunner>(
        detail::A2aRowRunner{*eng, boot, cfg, setup.facts, hooks, win->layout().signal_offset, ll_offset});
    // Every flag of the ll staging starts as 0xFFFFFFFF, which the signed comparison of kernels/a2a.hip takes
    // as older than any epoch below 2^31: fresh memory may hold anything.
    eng->poison(wo.bytes);
    eng->sync();
    boot.barrier("a2a.window_poisoned");
  }
};

A2aBench::A2aBench(Runtime& rt, Bootstrap& boot, int device, const A2aConfig& cfg)
    : impl_(std::make_unique<Impl>(rt, boot, device, cfg)) {}
A2aBench::~A2aBench() = default;

std::string A2aBench::handle_type() const {
  return to_string(impl_->ht);
}
bool A2aBench::time_sliced() const {
  return impl_->setup.time_sliced;
}
const std::string& A2aBench::plan_note() const {
  return impl_->setup.plan_note;
}

std::vector<A2aResult> A2aBench::run(const std::function<void(const std::string&)>& progress,
                                     Bootstrap* job) {
  auto& m = *impl_;
  std::vector<A2aResult> out;
  for (std::size_t chunk : m.cfg.chunks) {
    const A2aChunkPlan plan = a2a_chunk_plan(m.cfg, m.setup.facts, chunk);
    // Teams align per chunk and per row: as many rows as the longest plan of the job.
    std::size_t rows = plan.rows.size();
    if (job) {
      for (auto n : job->allgather_value("a2a.teams.rows", static_cast<std::uint64_t>(rows)))
        rows = std::max<std::size_t>(rows, n);
      job->barrier_fast("a2a.teams.chunk");
    }
    detail::Timer t = m.rows->timer(0);
    const Ceiling ceiling = detail::measure_ceiling(t, m.rows->layout(chunk), plan.ceiling_copies, m.world);
    for (std::size_t i = 0; i < rows; ++i) {
      if (job) job->barrier_fast("a2a.teams.row");
      if (i < plan.rows.size()) out.push_back(m.rows->run(plan, plan.rows[i], ceiling));
    }
    if (m.me == 0 && progress) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), "chunk %zu B done: ceiling %.1f GB/s (%s%s, spread %.1f%%)", chunk,
                    ceiling.gbps, ceiling.kind.c_str(), ceiling.graph ? ", graph" : "", 100 * ceiling.spread);
      progress(buf);
    }
  }
  return out;
}

void A2aBench::finish() {
  impl_->rows.reset();
  impl_->eng.reset();
  impl_->win->teardown();
}

Json A2aBench::gather_jit_json() {
  auto& m = *impl_;
  struct RankJit {
    double cold_ms, load_ms;
    std::int32_t compiled, cached;
  };
  RankJit mine{0, 0, 0, 0};
  const Jit* jit = m.eng ? m.eng->jit() : nullptr;
  if (jit)
    for (const auto& e : jit->stats()) {
      const bool cached = e.source == "cache";
      (cached ? mine.load_ms : mine.cold_ms) += e.ms;
      ++(cached ? mine.cached : mine.compiled);
    }
  auto all = m.boot.allgather_value("a2a.jit", mine);
  if (!jit) return Json(nullptr);
  Json j = jit->stats_json();
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
  const auto& m = *impl_;
  const detail::DevicePlacement& placement = m.setup.facts.placement;
  return {{"shared_device_without_mps", m.setup.time_sliced},
          {"all_ranks_one_device", placement.all_one_device},
          {"one_rank_per_device", placement.one_rank_per_device},
          {"plan_policy", m.setup.facts.distinct_policy ? "distinct_gpus" : "placement"},
          {"contract", "double-buffered by epoch parity: launch n writes receive buffer n % 2"},
          {"window",
           {{"alloc_bytes", m.win->layout().alloc_bytes},
            {"stride", m.win->layout().stride},
            {"signal_offset", m.win->layout().signal_offset}}}};
}

}  // namespace mori::symm
