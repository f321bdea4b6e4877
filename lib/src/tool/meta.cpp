// SPDX-License-Identifier: MIT
// The common `meta` block of every tool's report.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/base/version.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/comm/setup_cost.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/platform/detail/rtc.hpp"
#include "mori/symm/platform/gpu_state.hpp"
#include "mori/symm/tool/tool.hpp"

extern char** environ;

namespace mori::symm {
namespace {
struct RankInfo {
  char host[64];
  char device_name[96];
  char arch[32];
  std::int32_t pid;
  std::int32_t device;
  std::uint64_t faults_fired;  // bit i: the i-th item of MORI_FAULT fired on this rank
};

// The run-time compiler (meta.rtc): the one the JIT loads for the platform, or on the host runtime for the
// kernels this process compiled or loaded (mori-probe --jit-precompile); its version from nvrtcVersion or
// hiprtcVersion. "none" where no kernel is compiled. Each compiler is loaded once per process.
Json rtc_json(Runtime* rt) {
  std::string which;
  if (rt && rt->platform() == Platform::cuda) {
    which = "nvrtc";
  } else if (rt && rt->platform() == Platform::amd) {
    which = "hiprtc";
  } else if (const Json k = loaded_kernels_json(); !k.is_null()) {
    which = k["entries"][0].value("arch", "").rfind("gfx", 0) == 0 ? "hiprtc" : "nvrtc";
  }
  if (which.empty())
    return {{"name", "none"},
            {"version", nullptr},
            {"reason", rt ? "host runtime: no kernel was compiled or loaded" : "no GPU runtime"}};
  static std::mutex mu;
  static std::map<std::string, Json> loaded;
  std::lock_guard lk(mu);
  if (auto it = loaded.find(which); it != loaded.end()) return it->second;
  std::string why;
  const auto rtc = which == "hiprtc" ? detail::load_hiprtc(&why) : detail::load_nvrtc(&why);
  Json j = {{"name", which}, {"version", nullptr}};
  if (!rtc) {
    j["reason"] = why;
  } else if (rtc->version() == "unknown") {
    j["reason"] = which + "Version failed";
  } else {
    j["version"] = rtc->version();
  }
  if (rtc) j["library"] = rtc->library();
  return loaded[which] = j;
}

// meta.gpu_state (docs/json.md): every rank reads its own GPU now; the readings are gathered and told apart
// by PCI bus id.
void put_gpu_state(Json& m, ToolEnv& env, bool collective, int rank, const std::vector<std::int64_t>& pids) {
  GpuReading mine = gpu_state_now(env.rt.get(), env.device, env.gpu_start);
  mine.rank = rank;
  if (!env.rt) std::snprintf(mine.why, sizeof(mine.why), "%s", "this tool used no GPU runtime");
  std::vector<GpuReading> all(1, mine);
  if (env.boot && collective) all = env.boot->allgather_value("report.gpu_state", mine);
  std::string why;
  m["gpu_state"] = gpu_state_json(all, pids, &why);
  if (m["gpu_state"].is_null())
    m["gpu_state_reason"] = why;
  else
    m.erase("gpu_state_reason");
}

// The kernels this process loaded (meta.jit), where any was; a tool with a fuller account (mori-a2a) replaces
// it.
void put_jit(Json& m) {
  if (Json k = loaded_kernels_json(); !k.is_null()) m["jit"] = std::move(k);
}
// meta.ranks[]: every rank's host, pid, device and node (collective = false: this rank's alone).
Json ranks_json(const ToolEnv& env, const std::vector<RankInfo>& all, bool collective, int world_rank) {
  Json ranks = Json::array();
  for (std::size_t r = 0; r < all.size(); ++r) {
    const int rank = collective ? static_cast<int>(r) : world_rank;
    ranks.push_back({{"rank", rank},
                     {"host", all[r].host},
                     {"pid", all[r].pid},
                     {"device", all[r].device},
                     {"device_name", all[r].device_name},
                     {"arch", all[r].arch},
                     {"node", env.boot && rank < env.boot->world() ? env.boot->node_of(rank) : 0}});
  }
  return ranks;
}

// meta.env: this process's MORI_* variables and the visible devices.
Json env_json() {
  Json menv = Json::object();
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "MORI_", 5) == 0 || std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0 ||
        std::strncmp(*e, "HIP_VISIBLE_DEVICES=", 20) == 0) {
      std::string kv = *e;
      auto eq = kv.find('=');
      menv[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  return menv;
}

// meta.faults: the test-only fault points (MORI_FAULT), every item and the ranks it fired on.
Json faults_json(const std::vector<detail::FaultItem>& faults, const std::vector<RankInfo>& all,
                 bool collective, int world_rank) {
  Json mfaults = Json::array();
  for (std::size_t i = 0; i < faults.size(); ++i) {
    Json fired = Json::array();
    for (std::size_t r = 0; r < all.size() && i < 64; ++r)
      if (all[r].faults_fired >> i & 1) fired.push_back(collective ? static_cast<int>(r) : world_rank);
    mfaults.push_back({{"point", faults[i].point}, {"rank", faults[i].rank}, {"fired_on", fired}});
  }
  return mfaults;
}
}  // namespace

Json make_meta(ToolEnv& env, const std::string& handle_type, bool collective) {
  RankInfo mine{};
  std::strncpy(mine.host, detail::host_name().c_str(), sizeof(mine.host) - 1);
  mine.pid = static_cast<std::int32_t>(getpid());
  mine.device = env.device;
  const auto faults = detail::fault_items();
  for (std::size_t i = 0; i < faults.size() && i < 64; ++i)
    if (faults[i].fired) mine.faults_fired |= std::uint64_t{1} << i;
  std::string driver = "none", runtime = "none", backend = "none";
  if (env.rt) {
    auto info = env.rt->device_info(env.device);
    std::strncpy(mine.device_name, info.name.c_str(), sizeof(mine.device_name) - 1);
    std::strncpy(mine.arch, info.arch.c_str(), sizeof(mine.arch) - 1);
    driver = env.rt->driver_version();
    runtime = env.rt->runtime_version();
    backend = env.rt->platform() == Platform::host ? "host" : "gpu";
  }
  std::vector<RankInfo> all(1, mine);
  if (env.boot && collective) all = env.boot->allgather_value("report.meta", mine);

  Json m;
  m["tool"] = env.tool;
  m["version"] = version();
  // The app's own build (docs/reliability.md, "Revisions"); the library's equals it (checked at start).
  const BuildRevision rev = env.revision.commit.empty() ? library_revision() : env.revision;
  m["git_revision"] = rev.commit;
  m["git_clean"] = rev.clean < 0 ? Json(nullptr) : Json(rev.clean == 1);
  const std::optional<bool> stale = build_stale(env);
  m["build_stale"] = stale ? Json(*stale) : Json(nullptr);
  m["argv"] = env.argv;
  m["time"] = utc_now();
  // Not collective: this rank alone, in a world whose size MPI knows even where the bootstrap never finished.
  int world_rank = 0, world_size = static_cast<int>(all.size());
  if (!collective) {
    world_rank = world_rank_noexcept();
    world_size = world_size_noexcept();
  }
  m["world"] = world_size;
  m["ranks"] = ranks_json(env, all, collective, world_rank);
  // Each setup step's cost, the maximum over ranks (docs/json.md "meta.setup").
  m["setup"] =
      env.boot && collective ? gather_setup_cost(*env.boot) : local_setup_cost(world_rank, world_size);
  m["backend"] = backend;
  m["platform"] = env.rt ? to_string(env.rt->platform()) : "none";
  if (!env.gpu_unavailable.empty()) m["gpu_unavailable"] = env.gpu_unavailable;
  m["handle_type"] = handle_type;
  m["driver_version"] = driver;
  m["runtime_version"] = runtime;
  m["mps_active"] = mps_active();
  std::vector<std::int64_t> pids;
  for (const auto& r : all) pids.push_back(r.pid);
  put_gpu_state(m, env, collective, collective && env.boot ? env.boot->rank() : world_rank, pids);
  m["rtc"] = rtc_json(env.rt.get());
  put_jit(m);
  m["env"] = env_json();
  m["faults"] = faults_json(faults, all, collective, world_rank);
  m["environment"] = environment_json(
      env.rt.get(), gather_rank_facts(collective ? env.boot.get() : nullptr, env.rt.get(), env.device));
  return m;
}

void refresh_meta(ToolEnv& env, Json& meta) {
  std::vector<std::int64_t> pids;
  if (meta.contains("ranks") && meta["ranks"].is_array())
    for (const auto& r : meta["ranks"]) pids.push_back(r.value("pid", std::int64_t{-1}));
  put_gpu_state(meta, env, true, env.boot ? env.boot->rank() : 0, pids);
  if (!meta.contains("jit") || meta["jit"].is_null()) put_jit(meta);
  if (env.boot) meta["setup"] = gather_setup_cost(*env.boot);  // with the windows made since
}

}  // namespace mori::symm
