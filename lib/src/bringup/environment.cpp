// SPDX-License-Identifier: MIT
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/base/env.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/platform/detail/nvml.hpp"
#include "mori/symm/window/window.hpp"

namespace mori::symm {
namespace {

std::uint64_t ns_inode(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// The first line of a small system file (/proc), "" where it cannot be read.
std::string first_line(const char* path) {
  std::string text;
  try {
    text = read_file(path, kSystemFile);
  } catch (const std::exception&) {
    return {};
  }
  return text.substr(0, text.find('\n'));
}

void copy(char* dst, std::size_t n, const std::string& s) {
  std::strncpy(dst, s.c_str(), n - 1);
  dst[n - 1] = '\0';
}

const char* test_override(const char* name) {
  const char* v = env_read(name);
  return v && *v ? v : nullptr;
}

bool exists(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0;
}

// Files and cgroup lines that say "container"; empty when none.
std::vector<std::string> container_hints() {
  std::vector<std::string> h;
  if (exists("/.dockerenv")) h.push_back("/.dockerenv");
  if (exists("/run/.containerenv")) h.push_back("/run/.containerenv");
  if (const char* c = env_read("container"); c && *c) h.push_back(std::string("$container=") + c);
  std::string cgroup;
  try {
    cgroup = read_file("/proc/1/cgroup", kSystemFile);
  } catch (const std::exception&) {
    // not readable here: no hint from it
  }
  std::istringstream f(cgroup);
  for (std::string line; std::getline(f, line);)
    for (const char* k : {"docker", "kubepods", "containerd", "libpod", "lxc"})
      if (line.find(k) != std::string::npos) {
        h.push_back("/proc/1/cgroup: " + line);
        break;
      }
  return h;
}

bool imex_channel_present() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/dev/nvidia-caps-imex-channels", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

const char* compute_mode_name(int m) {
  switch (m) {
    case 0:
      return "DEFAULT";
    case 1:
      return "EXCLUSIVE_THREAD";
    case 2:
      return "PROHIBITED";
    case 3:
      return "EXCLUSIVE_PROCESS";
    default:
      return nullptr;
  }
}

// PCI addresses compared by value: NVML writes an 8-digit domain, the CUDA driver a 4-digit one.
bool same_pci(const std::string& a, const std::string& b) {
  unsigned d1 = 0, b1 = 0, s1 = 0, f1 = 0, d2 = 0, b2 = 0, s2 = 0, f2 = 0;
  return std::sscanf(a.c_str(), "%x:%x:%x.%x", &d1, &b1, &s1, &f1) == 4 &&
         std::sscanf(b.c_str(), "%x:%x:%x.%x", &d2, &b2, &s2, &f2) == 4 && d1 == d2 && b1 == b2 && s1 == s2 &&
         f1 == f2;
}

std::string pci_of(Runtime& rt, int device) {
  return rt.platform() == Platform::host ? std::string() : rt.device_info(device).pci_bus_id;
}

// NVML facts about one device as JSON; absent facts are null with a *_reason beside them.
Json device_json(Runtime& rt, int device) {
  const std::string pci = pci_of(rt, device);
  Json d = {{"index", device}, {"pci_bus_id", pci.empty() ? Json(nullptr) : Json(pci)}};
  const auto nv = pci.empty() ? detail::NvmlDevice{} : detail::nvml_device(pci);
  const std::string why = pci.empty() ? "host runtime: no GPU" : nv.why;
  char id[16];
  std::snprintf(id, sizeof(id), "0x%08x", nv.pci_device_id);
  d["pci_device_id"] = nv.found && nv.pci_device_id ? Json(id) : Json(nullptr);
  const char* mode = compute_mode_name(nv.compute_mode);
  d["compute_mode"] = mode ? Json(mode) : Json(nullptr);
  if (!nv.found) d["nvml_reason"] = why;
  if (nv.nvlink_known) {
    Json peers = Json::array();
    for (const auto& p : nv.nvlink)
      peers.push_back(
          {{"remote_pci_bus_id", p.remote_pci_bus_id}, {"remote_type", p.remote_type}, {"links", p.links}});
    d["nvlink"] = {{"active_links", nv.nvlink_active},
                   {"link_gbps", nv.link_mbps ? Json(nv.link_mbps / 1000.0) : Json(nullptr)},
                   {"peers", peers}};
  } else {
    d["nvlink"] = nullptr;
    d["nvlink_reason"] = nv.found ? nv.nvlink_why : why;
  }
  if (nv.fabric_known) {
    d["fabric"] = {{"state", nv.fabric_state},
                   {"status", nv.fabric_status},
                   {"clique_id", nv.clique_id},
                   {"cluster_uuid", nv.cluster_uuid}};
  } else {
    d["fabric"] = nullptr;
    d["fabric_reason"] = nv.found ? nv.fabric_why : why;
  }
  return d;
}

struct Kept {
  std::mutex mu;
  std::map<const Bootstrap*, std::vector<Diagnosis>> by_boot;
};
Kept& kept() {
  static Kept k;
  return k;
}

}  // namespace

RankFacts local_rank_facts(Runtime* rt, int device, int rank, int node) {
  RankFacts f{};
  const std::string host = detail::host_name();
  const char* h = test_override("MORI_TEST_HOSTNAME");
  copy(f.host, sizeof(f.host), h ? h : host);
  const char* b = test_override("MORI_TEST_BOOT_ID");
  copy(f.boot_id, sizeof(f.boot_id), b ? b : first_line("/proc/sys/kernel/random/boot_id"));
  f.pid_ns = ns_inode("/proc/self/ns/pid");
  const char* net = test_override("MORI_TEST_NET_NS");
  f.net_ns = net ? std::strtoull(net, nullptr, 10) : ns_inode("/proc/self/ns/net");
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    f.nofile_soft = rl.rlim_cur;
    f.nofile_hard = rl.rlim_max;
  }
  f.open_fds = open_fds_at_start();
  f.rank = rank;
  f.node = node;
  f.device = device;
  f.mps = mps_active() ? 1 : 0;
  f.gpu = rt && rt->platform() != Platform::host ? 1 : 0;
  copy(f.pci_bus_id, sizeof(f.pci_bus_id), f.gpu ? rt->device_info(device).pci_bus_id : "none");
  if (f.gpu) f.compute_mode = detail::nvml_device(f.pci_bus_id).compute_mode;
  return f;
}

std::vector<RankFacts> gather_rank_facts(Bootstrap* boot, Runtime* rt, int device) {
  if (!boot) return {local_rank_facts(rt, device, 0, 0)};
  auto mine = local_rank_facts(rt, device, boot->rank(), boot->node_of(boot->rank()));
  copy(mine.node_name, sizeof(mine.node_name), boot->node_name(boot->rank()));
  return boot->allgather_value("doctor.rank-facts", mine);
}

DeviceEnv device_env(Runtime& rt, int device) {
  DeviceEnv e;
  e.imex_channel_present = imex_channel_present();
  e.caps_present = exists("/dev/nvidia-caps");
  e.in_container = !container_hints().empty();
  const std::string pci = pci_of(rt, device);
  if (rt.platform() == Platform::cuda && !pci.empty()) {
    const auto nv = detail::nvml_device(pci);
    if (nv.fabric_known) {
      e.fabric_state = nv.fabric_state;
      e.fabric_status = nv.fabric_status;
    }
  }
  return e;
}

Json environment_json(Runtime* rt, const std::vector<RankFacts>& ranks) {
  Json e;
  utsname u{};
  if (uname(&u) == 0)
    e["kernel"] = {
        {"sysname", u.sysname}, {"release", u.release}, {"version", u.version}, {"machine", u.machine}};
  else
    e["kernel"] = nullptr;
  const auto hints = container_hints();
  e["container"] = {{"detected", !hints.empty()}, {"hints", hints}};
  const char* pipe = env_read("CUDA_MPS_PIPE_DIRECTORY");
  e["mps"] = {{"active", mps_active()}, {"pipe_directory", pipe && *pipe ? pipe : "/tmp/nvidia-mps"}};
  e["imex_channel_present"] = imex_channel_present();
  e["nvidia_caps_present"] = exists("/dev/nvidia-caps");
  const auto nv = detail::nvml_info();
  e["nvml"] = {{"available", nv.available},
               {"reason", nv.available ? Json(nullptr) : Json(nv.why)},
               {"driver_version", nv.driver_version.empty() ? Json(nullptr) : Json(nv.driver_version)}};
  Json devs = Json::array();
  if (rt)
    for (int d = 0; d < rt->device_count(); ++d) devs.push_back(device_json(*rt, d));
  e["devices"] = devs;
  Json rk = Json::array();
  for (const auto& r : ranks)
    rk.push_back({{"rank", r.rank},
                  {"host", r.host},
                  {"boot_id", r.boot_id},
                  {"pid_ns", r.pid_ns ? Json(r.pid_ns) : Json(nullptr)},
                  {"net_ns", r.net_ns ? Json(r.net_ns) : Json(nullptr)},
                  {"fd_limit", {{"soft", r.nofile_soft}, {"hard", r.nofile_hard}}},
                  {"mps", r.mps == 1},
                  {"pci_bus_id", r.pci_bus_id}});
  e["ranks"] = rk;
  return e;
}

Json link_gbps(Runtime& rt, int from, int to, std::string* why) {
  if (from == to) {
    *why = "same device: its own memory, no link";
    return nullptr;
  }
  return link_gbps_by_pci(pci_of(rt, from), pci_of(rt, to), why);
}

Json link_gbps_by_pci(const std::string& a, const std::string& b, std::string* why) {
  if (a.empty() || a == "none") {
    *why = "host runtime: no physical link";
    return nullptr;
  }
  if (same_pci(a, b)) {
    *why = "same device: its own memory, no link";
    return nullptr;
  }
  const auto nv = detail::nvml_device(a);
  if (!nv.nvlink_known || nv.link_mbps == 0) {
    *why = nv.found ? (nv.nvlink_why.empty() ? "NVML reports no NVLink speed" : nv.nvlink_why) : nv.why;
    return nullptr;
  }
  int links = 0;
  for (const auto& p : nv.nvlink)
    if (p.remote_type == "switch" || same_pci(p.remote_pci_bus_id, b)) links += p.links;
  if (links == 0) {
    *why = "no active NVLink from " + a + " to " + b;
    return nullptr;
  }
  return links * (nv.link_mbps / 1000.0);
}

std::vector<Diagnosis> cheap_diagnoses(Bootstrap& boot, Runtime* rt, int device, int windows) {
  auto d = diagnose_ranks(gather_rank_facts(&boot, rt, device), windows);
  {
    std::lock_guard lk(kept().mu);
    kept().by_boot[&boot] = d;
  }
  // A window whose rendezvous fails on this bootstrap prints them again (the window layer's hook).
  set_rendezvous_failure_hook(&log_kept_diagnoses);
  return d;
}

void log_kept_diagnoses(const Bootstrap& boot) noexcept {
  try {
    std::lock_guard lk(kept().mu);
    auto it = kept().by_boot.find(&boot);
    if (it == kept().by_boot.end()) return;
    std::vector<Diagnosis> shown;
    for (const auto& x : it->second)
      if (x.severity != Severity::info) shown.push_back(x);
    if (!shown.empty()) spdlog::error("doctor: likely causes:\n{}", format_diagnoses(shown));
  } catch (...) {
    // logging only
  }
}

}  // namespace mori::symm
