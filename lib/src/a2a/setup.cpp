// SPDX-License-Identifier: MIT
// The facts the all-to-all's plan depends on, gathered over the job (setup.hpp).
#include "setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "mori/symm/base/env.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/platform/detail/nvml.hpp"

namespace mori::symm::detail {

namespace {

// Which ranks share a device, whether MPS serves them, which run on MIG instances: one allgather. "Same GPU"
// is (the node of the load/store team, the device's PCI bus id): the team and the placement come from one
// source (a2a/detail/placement.hpp).
DevicePlacement find_placement(Runtime& rt, Bootstrap& boot, const DeviceInfo& info, int device,
                               bool host_runtime, bool* time_sliced) {
  const bool cuda = rt.platform() == Platform::cuda;
  const int nvml_mig = cuda && !info.pci_bus_id.empty() ? nvml_device(info.pci_bus_id).mig_mode : -1;
  const bool mig = mig_instance(rt.platform(), env_read("CUDA_VISIBLE_DEVICES"), nvml_mig);
  const RankPlace mine = rank_place(boot.node_of(boot.rank()), info, device, mps_active(), mig);
  const DevicePlacement pl = device_placement_of(boot.allgather_value("a2a.placement", mine), host_runtime);
  *time_sliced = !host_runtime && pl.max_ranks_per_device > 1 && pl.any_without_mps;
  return pl;
}

// The slowest NVLink path from any rank to any peer (GB/s per direction, read through NVML); collective.
void read_link_rates(Bootstrap& boot, DevicePlacement& placement) {
  std::string why;
  const double mine = std::max(slowest_link_from(
                                   placement.ranks, boot.rank(),
                                   [](const std::string& a, const std::string& b, std::string* w) {
                                     const Json g = link_gbps_by_pci(a, b, w);
                                     return g.is_number() ? g.get<double>() : 0.0;
                                   },
                                   &why),
                               0.0);
  double slowest = mine;
  for (double v : boot.allgather_value("a2a.links", mine)) slowest = std::min(slowest, v);
  placement.link_gbps = slowest > 0 ? slowest : 0;
  placement.link_source = slowest > 0
                              ? "NVLink " + std::to_string(static_cast<int>(slowest)) +
                                    " GB/s per direction on the slowest peer path (links x rate, NVML)"
                              : why;
}

void refuse_time_slicing(const A2aConfig& cfg, const DevicePlacement& placement, int me) {
  const bool device_sync = std::find(cfg.syncs.begin(), cfg.syncs.end(), SyncMode::device) != cfg.syncs.end();
  const std::string what = std::to_string(placement.max_ranks_per_device) +
                           " ranks share one GPU and no MPS daemon serves them: their contexts time-slice";
  if (device_sync && !cfg.allow_time_slicing)
    throw UsageError(what +
                     ", so a device barrier measures context switches (ms per iteration). Start MPS: "
                     "eval \"$(scripts/mps start)\", or give --sync host, or --allow-time-slicing to measure "
                     "it anyway");
  if (me == 0) spdlog::warn("{}; every row is marked time-sliced", what);
}

// Cache hints exist in kernels built for NVIDIA sm_80 and newer (the JIT's arch: MORI_GPU_ARCHS may name
// another than the device's); elsewhere the prelude's evict-first load is a plain one, and a row would
// record evict-first for loads that were not so marked. Gathered over all ranks (collective), so that a
// refusal is every rank's and auto chooses alike everywhere. Returns the ranks without.
std::vector<int> find_cache_hints(Runtime& rt, Bootstrap& boot, int device, A2aSetup& s) {
  s.jit_arch = rt.platform() == Platform::cuda ? target_arch(rt, device) : std::string();
  const std::int32_t mine = arch_has_l2_cache_hints(s.jit_arch) ? 1 : 0;
  std::vector<int> without;
  const auto all = boot.allgather_value("a2a.cache_hints", mine);
  for (std::size_t q = 0; q < all.size(); ++q)
    if (!all[q]) without.push_back(static_cast<int>(q));
  s.facts.cache_hints = without.empty();
  return without;
}

}  // namespace

A2aSetup gather_a2a_setup(Runtime& rt, Bootstrap& boot, int device, const DeviceInfo& info,
                          const A2aConfig& cfg, const A2aTestHooks& hooks,
                          std::function<long(const PushSpec&)> resident_blocks) {
  const bool host = rt.platform() == Platform::host;
  A2aSetup s;
  DevicePlacement& placement = s.facts.placement;
  placement = find_placement(rt, boot, info, device, host, &s.time_sliced);
  refuse_mig(placement);  // before anything reads the parent GPU's PCI bus id as a device
  if (placement.one_rank_per_device && !host) read_link_rates(boot, placement);
  if (s.time_sliced) refuse_time_slicing(cfg, placement, boot.rank());
  s.facts.platform = rt.platform();
  s.facts.device = info;
  const char* share = env_read("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  s.facts.mps_thread_share = share && *share && std::atof(share) < 100;
  s.facts.resident_blocks = std::move(resident_blocks);
  s.facts.distinct_policy = hooks.distinct_policy();
  const auto without_hints = find_cache_hints(rt, boot, device, s);
  a2a_plan_refusals(cfg, s.facts, without_hints, s.jit_arch);
  s.plan_note = a2a_table_note(s.facts);
  if (!s.plan_note.empty() && boot.job_rank(boot.rank()) == 0) spdlog::info("plan: {}", s.plan_note);
  return s;
}

std::uint64_t a2a_ll_staging_bytes(const A2aConfig& cfg, const DevicePlacement& placement, int world) {
  std::uint64_t largest = 0;
  bool any = false;
  for (std::size_t ch : cfg.chunks) {
    const auto ps = a2a_protocols(cfg, ch, placement.one_rank_per_device, world);
    if (std::find(ps.begin(), ps.end(), Protocol::ll) == ps.end()) continue;
    any = true;
    largest = std::max<std::uint64_t>(largest, ch);
  }
  return any ? 2 * static_cast<std::uint64_t>(world) * a2a_ll_pitch(largest) : 0;
}

}  // namespace mori::symm::detail
