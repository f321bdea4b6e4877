// NVML through dlopen: the few types and entry points used here are declared locally (the toolkit does not
// always ship nvml.h), with the layouts of NVML's public header.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "mori/symm/detail/nvml.hpp"
#include "mori/symm/runtime.hpp"

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
constexpr unsigned long long kXidCritical = 0x8;                 // nvmlEventTypeXidCriticalError
constexpr int kErrReplay = 0, kErrCrcFlit = 2, kErrCrcData = 3;  // nvmlNvLinkErrorCounter_t
constexpr Ret kTimeout = 10;                                     // NVML_ERROR_TIMEOUT
constexpr unsigned kNvlinkSpeedCommon = 90;                      // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
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

void read_nvlink(const Api& a, Dev h, NvmlDevice& d) {
  if (!a.link_state || !a.link_remote_pci) {
    d.nvlink_why = "this NVML has no NvLink queries";
    return;
  }
  std::map<std::string, NvlinkPeer> peers;
  unsigned first_active = kMaxLinks;
  unsigned long long replay = 0, crc = 0;
  bool counters = a.link_error_counter != nullptr;
  for (unsigned l = 0; l < kMaxLinks; ++l) {
    int active = 0;
    if (a.link_state(h, l, &active) != 0) continue;  // NOT_SUPPORTED past the last link
    if (!active) {
      ++d.nvlink_inactive;
      continue;
    }
    ++d.nvlink_active;
    for (int c : {kErrReplay, kErrCrcFlit, kErrCrcData}) {
      unsigned long long v = 0;
      if (!counters || a.link_error_counter(h, l, c, &v) != 0) {
        counters = false;
        break;
      }
      (c == kErrReplay ? replay : crc) += v;
    }
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
  if (counters && d.nvlink_active > 0) {
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
