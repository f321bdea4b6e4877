// SPDX-License-Identifier: MIT
// NVML through dlopen: the few types and entry points used here are declared locally (the toolkit does not
// always ship nvml.h), with the layouts of NVML's public header.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "mori/symm/platform/detail/nvml.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm::detail {
namespace {

using Dev = void*;
using Ret = int;  // nvmlReturn_t; 0 = NVML_SUCCESS

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct FabricInfo {  // nvmlGpuFabricInfo_t
  unsigned char cluster_uuid[16];
  Ret status;
  unsigned clique_id;
  unsigned char state;
  unsigned char pad[64];  // room for later versions of the struct
};
struct FieldValue {  // nvmlFieldValue_t
  unsigned field_id, scope_id;
  long long timestamp, latency_us;
  int value_type;
  Ret ret;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
  } value;
};
struct EventData {  // nvmlEventData_t
  Dev device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};
struct ViolationTime {  // nvmlViolationTime_t
  unsigned long long reference_time, violation_time;
};
struct ProcessInfo {  // nvmlProcessInfo_t (the layout of _v2 and _v3)
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};
constexpr unsigned long long kXidCritical = 0x8;                 // nvmlEventTypeXidCriticalError
constexpr int kErrReplay = 0, kErrCrcFlit = 2, kErrCrcData = 3;  // nvmlNvLinkErrorCounter_t
constexpr Ret kTimeout = 10;                                     // NVML_ERROR_TIMEOUT
constexpr int kClockSm = 1, kClockMem = 2;                       // nvmlClockType_t
constexpr int kPolicyPower = 0, kPolicyThermal = 1;              // nvmlPerfPolicyType_t
constexpr int kEccUncorrected = 1, kEccVolatile = 0;  // nvmlMemoryErrorType_t, nvmlEccCounterType_t
constexpr unsigned kNvlinkSpeedCommon = 90;           // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
constexpr unsigned kNvlinkGetSpeed = 164;  // NVML_FI_DEV_NVLINK_GET_SPEED (per link, scope = link index)
constexpr unsigned kMaxLinks = 18;         // NVML_NVLINK_MAX_LINKS

struct Api {
  void* lib = nullptr;
  std::string why;
  Ret (*init)() = nullptr;
  const char* (*error_string)(Ret) = nullptr;
  Ret (*driver_version)(char*, unsigned) = nullptr;
  Ret (*by_pci)(const char*, Dev*) = nullptr;
  Ret (*pci_info)(Dev, PciInfo*) = nullptr;
  Ret (*compute_mode)(Dev, int*) = nullptr;
  Ret (*mig_mode)(Dev, unsigned*, unsigned*) = nullptr;
  Ret (*link_state)(Dev, unsigned, int*) = nullptr;
  Ret (*link_remote_pci)(Dev, unsigned, PciInfo*) = nullptr;
  Ret (*link_remote_type)(Dev, unsigned, int*) = nullptr;
  Ret (*field_values)(Dev, int, FieldValue*) = nullptr;
  Ret (*fabric_info)(Dev, FabricInfo*) = nullptr;
  Ret (*link_error_counter)(Dev, unsigned, int, unsigned long long*) = nullptr;
  Ret (*event_set_create)(void**) = nullptr;
  Ret (*register_events)(Dev, unsigned long long, void*) = nullptr;
  Ret (*event_set_wait)(void*, EventData*, unsigned) = nullptr;
  Ret (*event_set_free)(void*) = nullptr;
  // meta.gpu_state (gpu_state.hpp)
  Ret (*clock_info)(Dev, int, unsigned*) = nullptr;
  Ret (*max_clock_info)(Dev, int, unsigned*) = nullptr;
  Ret (*applications_clock)(Dev, int, unsigned*) = nullptr;
  Ret (*default_applications_clock)(Dev, int, unsigned*) = nullptr;
  Ret (*performance_state)(Dev, int*) = nullptr;
  Ret (*enforced_power_limit)(Dev, unsigned*) = nullptr;
  Ret (*power_usage)(Dev, unsigned*) = nullptr;
  Ret (*temperature)(Dev, int, unsigned*) = nullptr;
  Ret (*clocks_event_reasons)(Dev, unsigned long long*) = nullptr;
  Ret (*ecc_mode)(Dev, int*, int*) = nullptr;
  Ret (*total_ecc_errors)(Dev, int, int, unsigned long long*) = nullptr;
  Ret (*persistence_mode)(Dev, int*) = nullptr;
  Ret (*compute_processes)(Dev, unsigned*, ProcessInfo*) = nullptr;
  Ret (*violation_status)(Dev, int, ViolationTime*) = nullptr;

  std::string err(Ret r) const { return error_string ? error_string(r) : "error " + std::to_string(r); }
};

template <class F>
void sym(Api& a, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(a.lib, name));
}

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    prepare_process_environment();  // before the library may create a missing home
    a.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      const char* e = dlerror();
      a.why = std::string("dlopen(libnvidia-ml.so.1) failed: ") + (e ? e : "?");
      return;
    }
    sym(a, a.init, "nvmlInit_v2");
    sym(a, a.error_string, "nvmlErrorString");
    sym(a, a.driver_version, "nvmlSystemGetDriverVersion");
    sym(a, a.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(a, a.pci_info, "nvmlDeviceGetPciInfo_v3");
    sym(a, a.compute_mode, "nvmlDeviceGetComputeMode");
    sym(a, a.mig_mode, "nvmlDeviceGetMigMode");
    sym(a, a.link_state, "nvmlDeviceGetNvLinkState");
    sym(a, a.link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(a, a.link_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    sym(a, a.field_values, "nvmlDeviceGetFieldValues");
    sym(a, a.fabric_info, "nvmlDeviceGetGpuFabricInfo");
    sym(a, a.link_error_counter, "nvmlDeviceGetNvLinkErrorCounter");
    sym(a, a.event_set_create, "nvmlEventSetCreate");
    sym(a, a.register_events, "nvmlDeviceRegisterEvents");
    sym(a, a.event_set_wait, "nvmlEventSetWait_v2");
    sym(a, a.event_set_free, "nvmlEventSetFree");
    sym(a, a.clock_info, "nvmlDeviceGetClockInfo");
    sym(a, a.max_clock_info, "nvmlDeviceGetMaxClockInfo");
    sym(a, a.applications_clock, "nvmlDeviceGetApplicationsClock");
    sym(a, a.default_applications_clock, "nvmlDeviceGetDefaultApplicationsClock");
    sym(a, a.performance_state, "nvmlDeviceGetPerformanceState");
    sym(a, a.enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    sym(a, a.power_usage, "nvmlDeviceGetPowerUsage");
    sym(a, a.temperature, "nvmlDeviceGetTemperature");
    // The throttle reasons were renamed clocks-event reasons (driver 535); older drivers have the old name
    // only.
    sym(a, a.clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!a.clocks_event_reasons) sym(a, a.clocks_event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    sym(a, a.ecc_mode, "nvmlDeviceGetEccMode");
    sym(a, a.total_ecc_errors, "nvmlDeviceGetTotalEccErrors");
    sym(a, a.persistence_mode, "nvmlDeviceGetPersistenceMode");
    sym(a, a.compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!a.compute_processes) sym(a, a.compute_processes, "nvmlDeviceGetComputeRunningProcesses_v2");
    sym(a, a.violation_status, "nvmlDeviceGetViolationStatus");
    if (!a.init || !a.by_pci) {
      a.why = "libnvidia-ml.so.1 lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
      a.init = nullptr;
      return;
    }
    if (Ret r = a.init(); r != 0) {
      a.why = "nvmlInit_v2 failed: " + a.err(r);
      a.init = nullptr;
    }
  });
  return a;
}

const char* remote_type(int t) {
  switch (t) {
    case 0:
      return "gpu";
    case 1:
      return "ibmnpu";
    case 2:
      return "switch";
    default:
      return "unknown";
  }
}

// The NVLink error counters summed over the active links: 0 and the sums, NVML's error of the first call that
// failed, GpuFact::kNoEntryPoint where this NVML lacks the calls or kNoActiveLink where no link is active.
int link_errors(const Api& a, Dev h, unsigned long long* replay, unsigned long long* crc) {
  if (!a.link_state || !a.link_error_counter) return GpuFact::kNoEntryPoint;
  *replay = *crc = 0;
  int active_links = 0;
  for (unsigned l = 0; l < kMaxLinks; ++l) {
    int active = 0;
    if (a.link_state(h, l, &active) != 0 || !active) continue;  // NOT_SUPPORTED past the last link
    ++active_links;
    for (int c : {kErrReplay, kErrCrcFlit, kErrCrcData}) {
      unsigned long long v = 0;
      if (Ret r = a.link_error_counter(h, l, c, &v); r != 0) return r;
      (c == kErrReplay ? *replay : *crc) += v;
    }
  }
  return active_links ? GpuFact::kRead : GpuFact::kNoActiveLink;
}

void read_nvlink(const Api& a, Dev h, NvmlDevice& d) {
  if (!a.link_state || !a.link_remote_pci) {
    d.nvlink_why = "this NVML has no NvLink queries";
    return;
  }
  std::map<std::string, NvlinkPeer> peers;
  unsigned first_active = kMaxLinks;
  for (unsigned l = 0; l < kMaxLinks; ++l) {
    int active = 0;
    if (a.link_state(h, l, &active) != 0) continue;  // NOT_SUPPORTED past the last link
    if (!active) {
      ++d.nvlink_inactive;
      continue;
    }
    ++d.nvlink_active;
    first_active = std::min(first_active, l);
    PciInfo p{};
    std::string remote = a.link_remote_pci(h, l, &p) == 0 ? std::string(p.bus_id) : "unknown";
    int t = -1;
    if (a.link_remote_type) a.link_remote_type(h, l, &t);
    auto& peer = peers[remote];
    peer.remote_pci_bus_id = remote;
    peer.remote_type = remote_type(t);
    ++peer.links;
  }
  for (auto& [k, v] : peers) d.nvlink.push_back(v);
  d.nvlink_known = true;
  unsigned long long replay = 0, crc = 0;
  if (d.nvlink_active > 0 && link_errors(a, h, &replay, &crc) == GpuFact::kRead) {
    d.replay_errors = replay;
    d.crc_errors = crc;
  }
  if (a.field_values) {
    FieldValue f{};
    f.field_id = kNvlinkSpeedCommon;
    if (a.field_values(h, 1, &f) == 0 && f.ret == 0) d.link_mbps = f.value.ui;
    // Hopper's NVML answers the common-speed field NOT_SUPPORTED; the per-link field (newer) has it.
    if (d.link_mbps == 0 && first_active < kMaxLinks) {
      FieldValue g{};
      g.field_id = kNvlinkGetSpeed;
      g.scope_id = first_active;
      if (a.field_values(h, 1, &g) == 0 && g.ret == 0) d.link_mbps = g.value.ui;
    }
  }
}

void read_fabric(const Api& a, Dev h, NvmlDevice& d) {
  if (!a.fabric_info) {
    d.fabric_why = "this NVML has no nvmlDeviceGetGpuFabricInfo (driver older than 535)";
    return;
  }
  FabricInfo f{};
  if (Ret r = a.fabric_info(h, &f); r != 0) {
    d.fabric_why = "nvmlDeviceGetGpuFabricInfo: " + a.err(r);
    return;
  }
  d.fabric_known = true;
  d.fabric_state = f.state;
  d.fabric_status = f.status == 0 ? "SUCCESS" : a.err(f.status);
  d.clique_id = f.clique_id;
  char uuid[40];
  for (int i = 0; i < 16; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", f.cluster_uuid[i]);
  d.cluster_uuid = uuid;
}

}  // namespace

NvmlInfo nvml_info() {
  const Api& a = api();
  NvmlInfo i;
  if (!a.init) {
    i.why = a.why;
    return i;
  }
  i.available = true;
  char buf[96] = {};
  if (a.driver_version && a.driver_version(buf, sizeof(buf)) == 0) i.driver_version = buf;
  return i;
}

NvmlDevice nvml_device(const std::string& pci_bus_id) {
  const Api& a = api();
  NvmlDevice d;
  if (!a.init) {
    d.why = a.why;
    return d;
  }
  Dev h = nullptr;
  if (Ret r = a.by_pci(pci_bus_id.c_str(), &h); r != 0) {
    d.why = "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id + "): " + a.err(r);
    return d;
  }
  d.found = true;
  PciInfo p{};
  if (a.pci_info && a.pci_info(h, &p) == 0) d.pci_device_id = p.pci_device_id;
  int mode = -1;
  if (a.compute_mode && a.compute_mode(h, &mode) == 0) d.compute_mode = mode;
  read_nvlink(a, h, d);
  unsigned mig_current = 0, mig_pending = 0;  // read only: MIG settings are never changed here
  if (a.mig_mode && a.mig_mode(h, &mig_current, &mig_pending) == 0) d.mig_mode = mig_current ? 1 : 0;
  read_fabric(a, h, d);
  return d;
}

namespace {

// One fact from a call of NVML's that writes one value: the value, or NVML's return code, or kNoEntryPoint.
template <class T, class F, class... A>
void fact(GpuFact& f, F fn, Dev h, A... args) {
  if (!fn) {
    f.status = GpuFact::kNoEntryPoint;
    return;
  }
  T v{};
  f.status = fn(h, args..., &v);
  f.value = f.status == 0 ? static_cast<std::uint64_t>(v) : 0;
}

void read_counters(const Api& a, Dev h, GpuReading& r) {
  ViolationTime v{};
  for (auto [id, policy] : {std::pair{GpuFactId::power_violation_ns, kPolicyPower},
                            std::pair{GpuFactId::thermal_violation_ns, kPolicyThermal}}) {
    GpuFact& f = r.at(id);
    f.status = a.violation_status ? a.violation_status(h, policy, &v) : GpuFact::kNoEntryPoint;
    f.value = f.status == 0 ? v.violation_time : 0;
  }
  fact<unsigned long long>(r.at(GpuFactId::ecc_uncorrected_volatile), a.total_ecc_errors, h, kEccUncorrected,
                           kEccVolatile);
  unsigned long long replay = 0, crc = 0;
  const int s = link_errors(a, h, &replay, &crc);
  r.at(GpuFactId::nvlink_replay) = {s == 0 ? replay : 0, s};
  r.at(GpuFactId::nvlink_crc) = {s == 0 ? crc : 0, s};
}

void read_processes(const Api& a, Dev h, GpuReading& r) {
  GpuFact& f = r.at(GpuFactId::processes);
  if (!a.compute_processes) {
    f.status = GpuFact::kNoEntryPoint;
    return;
  }
  std::vector<ProcessInfo> list(kGpuMaxPids);
  unsigned n = kGpuMaxPids;
  f.status = a.compute_processes(h, &n, list.data());  // more than kGpuMaxPids: NVML_ERROR_INSUFFICIENT_SIZE
  if (f.status != 0) return;
  f.value = std::min<unsigned>(n, kGpuMaxPids);
  for (unsigned i = 0; i < f.value; ++i) r.pids[i] = list[i].pid;
}

}  // namespace

void nvml_read_state(const std::string& pci_bus_id, bool counters_only, GpuReading& r) noexcept {
  try {
    std::snprintf(r.pci_bus_id, sizeof(r.pci_bus_id), "%s", pci_bus_id.c_str());
    const Api& a = api();
    if (!a.init) {
      std::snprintf(r.why, sizeof(r.why), "%s", a.why.c_str());
      return;
    }
    Dev h = nullptr;
    if (Ret e = a.by_pci(pci_bus_id.c_str(), &h); e != 0) {
      std::snprintf(r.why, sizeof(r.why), "nvmlDeviceGetHandleByPciBusId_v2(%s): %s", pci_bus_id.c_str(),
                    a.err(e).c_str());
      return;
    }
    r.found = 1;
    read_counters(a, h, r);
    if (counters_only) return;
    if (a.driver_version) a.driver_version(r.driver_version, sizeof(r.driver_version));
    r.driver_version[sizeof(r.driver_version) - 1] = '\0';
    using F = GpuFactId;
    fact<unsigned>(r.at(F::sm_mhz), a.clock_info, h, kClockSm);
    fact<unsigned>(r.at(F::mem_mhz), a.clock_info, h, kClockMem);
    fact<unsigned>(r.at(F::sm_max_mhz), a.max_clock_info, h, kClockSm);
    fact<unsigned>(r.at(F::mem_max_mhz), a.max_clock_info, h, kClockMem);
    fact<unsigned>(r.at(F::sm_applications_mhz), a.applications_clock, h, kClockSm);
    fact<unsigned>(r.at(F::mem_applications_mhz), a.applications_clock, h, kClockMem);
    fact<unsigned>(r.at(F::sm_default_applications_mhz), a.default_applications_clock, h, kClockSm);
    fact<unsigned>(r.at(F::mem_default_applications_mhz), a.default_applications_clock, h, kClockMem);
    fact<int>(r.at(F::pstate), a.performance_state, h);
    fact<unsigned>(r.at(F::power_limit_mw), a.enforced_power_limit, h);
    fact<unsigned>(r.at(F::power_draw_mw), a.power_usage, h);
    fact<unsigned>(r.at(F::temperature_c), a.temperature, h, 0);  // NVML_TEMPERATURE_GPU
    fact<unsigned long long>(r.at(F::clocks_event_reasons), a.clocks_event_reasons, h);
    int ecc = 0, pending = 0;
    GpuFact& e = r.at(F::ecc_enabled);
    e.status = a.ecc_mode ? a.ecc_mode(h, &ecc, &pending) : GpuFact::kNoEntryPoint;
    e.value = e.status == 0 && ecc ? 1 : 0;
    r.at(F::ecc_pending) = {e.status == 0 && pending ? 1u : 0u, e.status};
    fact<int>(r.at(F::persistence_mode), a.persistence_mode, h);
    read_processes(a, h, r);
  } catch (...) {
    // an allocation failed: what was read stays, the rest is not read
  }
}

XidWatch::XidWatch(const std::string& pci_bus_id) noexcept {
  const Api& a = api();
  if (!a.init) {
    why_ = a.why;
    return;
  }
  if (!a.event_set_create || !a.register_events || !a.event_set_wait || !a.event_set_free) {
    why_ = "this NVML has no event sets";
    return;
  }
  Dev h = nullptr;
  if (Ret r = a.by_pci(pci_bus_id.c_str(), &h); r != 0) {
    why_ = "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id + "): " + a.err(r);
    return;
  }
  void* set = nullptr;
  if (Ret r = a.event_set_create(&set); r != 0) {
    why_ = "nvmlEventSetCreate: " + a.err(r);
    return;
  }
  if (Ret r = a.register_events(h, kXidCritical, set); r != 0) {
    why_ = "nvmlDeviceRegisterEvents(XidCriticalError): " + a.err(r);
    a.event_set_free(set);
    return;
  }
  set_ = set;
}

XidWatch::~XidWatch() {
  if (set_) api().event_set_free(set_);
}

std::optional<int> XidWatch::events(std::string* why) noexcept {
  if (!set_) {
    *why = why_;
    return std::nullopt;
  }
  const Api& a = api();
  for (int i = 0; i < 1024; ++i) {  // bounded: drain what is queued, never wait
    EventData e{};
    const Ret r = a.event_set_wait(set_, &e, 0);
    if (r == kTimeout) break;
    if (r != 0) {
      *why = "nvmlEventSetWait_v2: " + a.err(r);
      return std::nullopt;
    }
    if (e.event_type & kXidCritical) ++seen_;
  }
  return seen_;
}

}  // namespace mori::symm::detail
