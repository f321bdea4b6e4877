// SPDX-License-Identifier: MIT
#include "mori/symm/bringup/probe.hpp"

#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/platform/detail/owned.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;

// Runs one step, timing it; returns false (and records the error name) when it throws.
bool step(HandleProbe& hp, const char* name, const std::function<void()>& f) {
  const auto t0 = Clock::now();
  StepStatus status;
  try {
    f();
  } catch (const ApiError& e) {
    status = StepStatus::failed(e.api_error());
  } catch (const std::exception& e) {
    status = StepStatus::failed(e.what());
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  hp.steps.push_back({name, status, us});
  return status.ok();
}

void probe_type(Runtime& rt, int device, HandleProbe& hp) {
  std::size_t gran = 0;
  PhysHandle created = 0, imported = 0;
  bool have_created = false, have_imported = false, mapped = false;
  void* va = nullptr;
  int fd = -1;
  // Each step runs only while the previous ones worked; whatever was made is returned afterwards.
  bool ok = step(hp, "granularity", [&] {
    hp.granularity_minimum = rt.granularity(device, hp.type, false);
    hp.granularity_recommended = rt.granularity(device, hp.type, true);
    gran = hp.granularity_recommended;
  });
  ok = ok && step(hp, "create", [&] {
         created = rt.mem_create(device, gran, hp.type);
         have_created = true;
       });
  FabricBlob blob;
  ok = ok && step(hp, "export", [&] {
         if (hp.type == HandleType::posix_fd)
           fd = rt.export_fd(created);
         else
           blob = rt.export_fabric(created);
       });
  ok = ok && step(hp, "import", [&] {
         imported = hp.type == HandleType::posix_fd ? rt.import_fd(fd, gran) : rt.import_fabric(blob);
         have_imported = true;
       });
  if (fd >= 0) close(fd);
  ok = ok && step(hp, "reserve", [&] { va = rt.reserve(gran, gran); });
  ok = ok && step(hp, "map", [&] {
         rt.map(va, gran, imported);
         mapped = true;
       });
  ok = ok && step(hp, "set_access", [&] { rt.set_access(va, gran, device); });
  ok = ok && step(hp, "write_read", [&] {
         std::vector<std::uint32_t> pattern(4096), back(4096);
         for (std::size_t i = 0; i < pattern.size(); ++i)
           pattern[i] = static_cast<std::uint32_t>(0x9e3779b9u * (i + 1));
         rt.copy_to_device(va, pattern.data(), pattern.size() * 4);
         rt.copy_to_host(back.data(), va, back.size() * 4);
         if (pattern != back) throw CheckFailed("MISMATCH");
       });
  if (mapped) ok = step(hp, "unmap", [&] { rt.unmap(va, gran); }) && ok;
  if (have_imported) ok = step(hp, "release", [&] { rt.release(imported); }) && ok;
  if (va) ok = step(hp, "free", [&] { rt.free_reservation(va, gran); }) && ok;
  if (have_created) {
    try {
      rt.release(created);
    } catch (const std::exception& e) {
      spdlog::warn("probe: releasing the probe allocation failed: {}", e.what());
    }
  }
  hp.usable = ok;
  rt.clear_error();
}

}  // namespace

void decide(DeviceProbe& p) {
  auto failed_step = [](const HandleProbe& h) {
    for (auto& s : h.steps)
      if (!s.status.ok()) return s.step + " -> " + s.status.error();
    return std::string("?");
  };
  if (!p.info.vmm_supported && !p.posix_fd.usable && !p.fabric.usable) {
    p.chosen.reset();
    p.reason = "the device reports no virtual memory management support, and no handle type worked";
  } else if (p.fabric.usable) {
    p.chosen = HandleType::fabric;
    p.reason = "every fabric step worked";
  } else if (p.posix_fd.usable) {
    p.chosen = HandleType::posix_fd;
    p.reason = "fabric failed at " + failed_step(p.fabric) + "; every posix_fd step worked";
    if (p.imex_channel == "absent" && p.fabric.attribute == 1)
      p.reason +=
          " (no IMEX channel under /dev/nvidia-caps-imex-channels: the usual reason fabric is not permitted)";
  } else {
    p.chosen.reset();
    p.reason =
        "fabric failed at " + failed_step(p.fabric) + "; posix_fd failed at " + failed_step(p.posix_fd);
  }
  p.attribute_disagrees = (p.fabric.attribute >= 0 && (p.fabric.attribute == 1) != p.fabric.usable) ||
                          (p.posix_fd.attribute >= 0 && (p.posix_fd.attribute == 1) != p.posix_fd.usable);
}

DeviceProbe probe_device(Runtime& rt, int device) {
  DeviceProbe p;
  p.info = rt.device_info(device);
  const int prev = rt.current_device();
  rt.set_device(device);
  p.posix_fd.type = HandleType::posix_fd;
  p.fabric.type = HandleType::fabric;
  if (rt.platform() == Platform::host) {
    p.posix_fd.attribute = p.fabric.attribute = -1;
  } else {
    p.posix_fd.attribute = p.info.posix_fd_attribute ? 1 : 0;
    p.fabric.attribute = p.info.fabric_attribute ? 1 : 0;
    if (rt.platform() == Platform::amd) p.posix_fd.attribute = p.fabric.attribute = -1;
  }
  if (rt.platform() == Platform::cuda) {
    struct stat st {};
    p.imex_channel = stat("/dev/nvidia-caps-imex-channels", &st) == 0 ? "present" : "absent";
  } else {
    p.imex_channel = "n/a";
  }
  probe_type(rt, device, p.posix_fd);
  probe_type(rt, device, p.fabric);  // never a multicast object: only plain VMM calls
  decide(p);
  rt.set_device(prev);
  return p;
}

const DeviceProbe& probe_device_cached(Runtime& rt, int device) {
  static std::mutex mu;
  // Keyed on what the probe is about (the platform, the device index and its PCI address), not on the
  // runtime object's address, which a later runtime may reuse.
  static std::map<std::tuple<Platform, int, std::string>, DeviceProbe> cache;
  auto key = std::make_tuple(rt.platform(), device, rt.device_info(device).pci_bus_id);
  std::lock_guard lk(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, probe_device(rt, device)).first;
  return it->second;
}

HandleType choose_handle_type(Runtime& rt, int device) {
  const auto& p = probe_device_cached(rt, device);
  if (!p.chosen) throw ApiError("choose_handle_type", __FILE__, __LINE__, "NO_USABLE_HANDLE_TYPE", p.reason);
  return *p.chosen;
}

HandleType resolve_handle_type(Runtime& rt, int device, const std::optional<HandleType>& choice) {
  return choice ? *choice : choose_handle_type(rt, device);
}

namespace {
Json handle_json(const HandleProbe& h) {
  Json steps = Json::array();
  for (auto& s : h.steps) steps.push_back({{"step", s.step}, {"status", to_string(s.status)}, {"us", s.us}});
  Json j;
  j["attribute"] = h.attribute < 0 ? Json(nullptr) : Json(h.attribute == 1);
  j["usable"] = h.usable;
  j["granularity"] = {{"minimum", h.granularity_minimum}, {"recommended", h.granularity_recommended}};
  j["steps"] = steps;
  return j;
}
}  // namespace

Json to_json(const DeviceProbe& p) {
  Json d;
  d["index"] = p.info.index;
  d["name"] = p.info.name;
  d["arch"] = p.info.arch;
  d["pci_bus_id"] = p.info.pci_bus_id;
  d["multiprocessors"] = p.info.multiprocessors;
  d["warp_size"] = p.info.warp_size;
  d["memory_bytes"] = p.info.memory_bytes;
  d["vmm_supported"] = p.info.vmm_supported;
  d["granularity"] = {{"minimum", p.posix_fd.granularity_minimum},
                      {"recommended", p.posix_fd.granularity_recommended}};
  d["handle_types"] = {{"posix_fd", handle_json(p.posix_fd)}, {"fabric", handle_json(p.fabric)}};
  d["chosen_handle_type"] = p.chosen ? Json(to_string(*p.chosen)) : Json(nullptr);
  d["reason"] = p.reason;
  d["attribute_disagrees"] = p.attribute_disagrees;
  d["imex_channel"] = p.imex_channel;
  d["uncached"] = {{"supported", p.info.uncached_supported}, {"note", p.info.uncached_note}};
  return d;
}

namespace {
// Owner-local bandwidth on a VMM allocation: writes (memset) and reads (copy out to a plain buffer), GB/s.
std::pair<double, double> local_bandwidth(Runtime& rt, void* va, void* scratch, std::size_t bytes) {
  detail::OwnedStream stream(rt);
  detail::OwnedEvent ea(rt), eb(rt);
  Stream s = stream.get();
  Event a = ea.get(), b = eb.get();
  auto time_ms = [&](const std::function<void()>& f) {
    f();  // warm-up
    rt.stream_sync(s);
    std::vector<float> ms;
    for (int i = 0; i < 5; ++i) {
      rt.event_record(a, s);
      f();
      rt.event_record(b, s);
      rt.event_sync(b);
      ms.push_back(rt.event_elapsed_ms(a, b));
    }
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(ms[ms.size() / 2]);
  };
  double w = time_ms([&] { rt.memset_async(va, 0x5a, bytes, s); });
  double r = time_ms([&] { rt.copy_async(scratch, va, bytes, s); });
  return {bytes / (w * 1e6), bytes / (r * 1e6)};
}
}  // namespace

Json probe_deep(Runtime& rt, std::size_t bytes) {
  const int n = rt.device_count();
  Json pairs = Json::array();
  Json penalty = Json::array();
  const int prev = rt.current_device();
  for (int owner = 0; owner < n; ++owner) {
    rt.set_device(owner);
    const std::size_t gran = rt.granularity(owner, HandleType::posix_fd, true);
    const std::size_t size = (bytes + gran - 1) / gran * gran;
    detail::OwnedMapping mapping(rt, owner, size, gran, HandleType::posix_fd);
    void* va = mapping.va();
    detail::OwnedBuffer scratch_buffer(rt, size);
    void* scratch = scratch_buffer.p;
    auto before = local_bandwidth(rt, va, scratch, size);
    for (int peer = 0; peer < n; ++peer) {
      Json pr = {{"owner", owner}, {"accessor", peer}};
      StepStatus status;
      try {
        if (peer != owner) rt.set_access(va, size, peer);
        rt.set_device(peer);
        // The accessor writes a pattern through the mapping; the owner reads it back.
        detail::OwnedStream s(rt);
        rt.memset_async(va, static_cast<std::uint8_t>(0x40 + peer), 4096, s.get());
        rt.stream_sync(s.get());
        rt.set_device(owner);
        std::vector<std::uint8_t> back(4096);
        rt.copy_to_host(back.data(), va, back.size());
        for (auto v : back)
          if (v != static_cast<std::uint8_t>(0x40 + peer)) status = StepStatus::failed("MISMATCH");
      } catch (const ApiError& e) {
        status = StepStatus::failed(e.api_error());
        rt.set_device(owner);
      }
      pr["status"] = to_string(status);
      pr["reachable"] = status.ok();
      pairs.push_back(pr);
      if (peer != owner && status.ok()) {
        auto after = local_bandwidth(rt, va, scratch, size);
        penalty.push_back({{"owner", owner},
                           {"granted_to", peer},
                           {"write_gbps_before", before.first},
                           {"write_gbps_after", after.first},
                           {"read_gbps_before", before.second},
                           {"read_gbps_after", after.second}});
      }
    }
    if (n == 1)
      penalty.push_back({{"owner", owner},
                         {"granted_to", nullptr},
                         {"write_gbps_before", before.first},
                         {"read_gbps_before", before.second},
                         {"note", "one device: no peer to grant access to"}});
  }
  rt.set_device(prev);
  return {{"bytes", bytes}, {"pairs", pairs}, {"access_grant_penalty", penalty}};
}

}  // namespace mori::symm
